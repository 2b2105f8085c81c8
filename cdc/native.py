"""Compiled helpers for the kernels: XXH3-128 digests and views of raw buffers.

The chunking kernel digests every chunk while the bytes are still in cache, without a
round trip to Python per chunk. It calls `XXH3_128bits` from the C library that the
`xxhash` package already ships (its extension module exports the symbol), through a Numba
intrinsic. Under `NUMBA_DISABLE_JIT=1` the same call runs `xxhash.xxh3_128_digest`, which
is the reference the tests compare against.

The digest is the canonical (big-endian) form, byte for byte what
`xxhash.xxh3_128_digest` returns: the high 64 bits first.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import xxhash
from llvmlite import binding, ir
from numba import carray, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from cdc.errors import DigestUnavailableError

_SYMBOL = "XXH3_128bits"


def _register_symbol() -> None:
    """Tell LLVM where `XXH3_128bits` lives, so cached kernels link by name."""
    try:
        library = ctypes.CDLL(xxhash._xxhash.__file__)
        address = ctypes.cast(getattr(library, _SYMBOL), ctypes.c_void_p).value
    except (AttributeError, OSError) as exc:
        raise DigestUnavailableError(
            f"the installed xxhash ({xxhash.VERSION}) does not export {_SYMBOL}; "
            "reinstall it with `pip install -r requirements.txt`"
        ) from exc
    binding.add_symbol(_SYMBOL, address)


_register_symbol()


def xxh3_128_into(data, start: int, length: int, out: np.ndarray) -> None:
    """Write the XXH3-128 digest of `data[start:start + length]` into the 16 bytes `out`.

    `data` is `bytes` or a uint8 array.
    """
    out[:16] = np.frombuffer(xxhash.xxh3_128_digest(bytes(data[start:start + length])), np.uint8)


def xxh3_64_of(data, start: int, length: int) -> int:
    """The low 64 bits of the XXH3-128 digest of `data[start:start + length]`: a word's
    identity when two texts are diffed word by word."""
    return int.from_bytes(xxhash.xxh3_128_digest(bytes(data[start:start + length]))[8:], "big")


@intrinsic
def _xxh3_128_call(typingctx, pointer, length):
    """Call the C routine; returns (low64, high64) as the C struct is laid out."""
    signature = types.UniTuple(types.uint64, 2)(types.voidptr, types.uintp)

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        function_type = ir.FunctionType(ir.LiteralStructType([i64, i64]), [cgutils.voidptr_t, i64])
        function = cgutils.get_or_insert_function(builder.module, function_type, _SYMBOL)
        result = builder.call(function, [args[0], args[1]])
        return context.make_tuple(
            builder, sig.return_type, [builder.extract_value(result, 0), builder.extract_value(result, 1)]
        )

    return signature, codegen


@intrinsic
def _byte_pointer(typingctx, array, start):
    """The address of `array[start]`, for handing a slice to C without a copy."""
    signature = types.voidptr(array, types.uintp)

    def codegen(context, builder, sig, args):
        view = context.make_array(sig.args[0])(context, builder, args[0])
        pointer = builder.gep(view.data, [args[1]])
        return builder.bitcast(pointer, cgutils.voidptr_t)

    return signature, codegen


@overload(xxh3_128_into, jit_options={"nogil": True})
def _xxh3_128_into_compiled(data, start, length, out):
    def implementation(data, start, length, out):
        low, high = _xxh3_128_call(_byte_pointer(data, np.uintp(start)), np.uintp(length))
        for i in range(8):
            out[i] = np.uint8((high >> np.uint64(56 - 8 * i)) & np.uint64(0xFF))
            out[8 + i] = np.uint8((low >> np.uint64(56 - 8 * i)) & np.uint64(0xFF))

    return implementation


@overload(xxh3_64_of, jit_options={"nogil": True})
def _xxh3_64_of_compiled(data, start, length):
    def implementation(data, start, length):
        return _xxh3_128_call(_byte_pointer(data, np.uintp(start)), np.uintp(length))[0]

    return implementation


# CPython keeps a bytes object's data at a fixed offset from the object; checked below
# against ctypes so another interpreter falls back to the slower, general route.
_BYTES_DATA_OFFSET = sys.getsizeof(b"") - 1


def _bytes_offset_holds() -> bool:
    probe = b"cdc probe"
    return ctypes.cast(probe, ctypes.c_void_p).value == id(probe) + _BYTES_DATA_OFFSET


_FAST_BYTES_ADDRESS = _bytes_offset_holds()


def buffer_address(data: bytes | np.ndarray) -> int:
    """Address of the first byte of a `bytes` object or a contiguous uint8 array.

    The caller keeps `data` alive for as long as the address is used.
    """
    if type(data) is bytes:
        if _FAST_BYTES_ADDRESS:
            return id(data) + _BYTES_DATA_OFFSET
        return ctypes.cast(data, ctypes.c_void_p).value
    return data.__array_interface__["data"][0]


def byte_view(address: int, length: int) -> np.ndarray:
    """A read-only uint8 array over `length` bytes at `address` (no copy)."""
    if length == 0:
        return np.empty(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * int(length)).from_address(int(address)))


@intrinsic
def _address_as_pointer(typingctx, address):
    signature = types.voidptr(types.uintp)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return signature, codegen


@overload(byte_view, jit_options={"nogil": True})
def _byte_view_compiled(address, length):
    def implementation(address, length):
        return carray(_address_as_pointer(np.uintp(address)), length, np.uint8)

    return implementation
