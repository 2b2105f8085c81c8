"""What Numba's JIT needs to compile the helpers of `cdc.core.native` inside the kernels.

`xxh3_128_record` and `xxh3_64_of` call `XXH3_128bits` from the xxhash package's own C
library through an intrinsic, `find_byte` calls the C library's `memchr`; `byte_view`
becomes a view of raw memory. Imported by
`cdc.core.native` only when the kernels are compiled by the JIT, so a process running the
kernels compiled ahead of time never loads Numba or LLVM.
"""

from __future__ import annotations

import ctypes

import numpy as np
import xxhash
from llvmlite import binding, ir
from numba import carray, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from cdc.core.native import byte_view, find_byte, xxh3_64_of, xxh3_128_record
from cdc.errors import DigestUnavailableError

_SYMBOL = "XXH3_128bits"
_MEMCHR = "memchr"


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
    # The C library's own, named for the JIT's linker as the build ahead of time links it.
    binding.add_symbol(_MEMCHR, ctypes.cast(ctypes.CDLL(None).memchr, ctypes.c_void_p).value)


_register_symbol()


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


@intrinsic
def _memchr_call(typingctx, pointer, byte, length):
    """Call `memchr(pointer, byte, length)`; returns the offset from `pointer` of the byte
    found, or -1."""
    signature = types.intp(types.voidptr, types.intp, types.uintp)

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        function_type = ir.FunctionType(cgutils.voidptr_t, [cgutils.voidptr_t, ir.IntType(32), i64])
        function = cgutils.get_or_insert_function(builder.module, function_type, _MEMCHR)
        found = builder.call(function, [args[0], builder.trunc(args[1], ir.IntType(32)), args[2]])
        offset = builder.sub(builder.ptrtoint(found, i64), builder.ptrtoint(args[0], i64))
        missing = builder.icmp_unsigned("==", builder.ptrtoint(found, i64), ir.Constant(i64, 0))
        return builder.select(missing, ir.Constant(i64, -1), offset)

    return signature, codegen


@overload(find_byte, jit_options={"nogil": True})
def _find_byte_compiled(data, byte, first, stop):
    def implementation(data, byte, first, stop):
        if stop <= first:
            return -1
        found = _memchr_call(_byte_pointer(data, np.uintp(first)), byte, np.uintp(stop - first))
        return found if found < 0 else first + found

    return implementation


@intrinsic
def _byte_swapped(typingctx, value):
    """The eight bytes of `value` in the other order, as int64: a big-endian word read back
    as a little-endian one."""
    signature = types.int64(types.uint64)

    def codegen(context, builder, sig, args):
        return builder.bswap(args[0])

    return signature, codegen


@overload(xxh3_128_record, jit_options={"nogil": True})
def _xxh3_128_record_compiled(data, start, length, records, row):
    def implementation(data, start, length, records, row):
        low, high = _xxh3_128_call(_byte_pointer(data, np.uintp(start)), np.uintp(length))
        records[row, 3] = _byte_swapped(high)  # the canonical digest: high 64 bits first,
        records[row, 4] = _byte_swapped(low)  # each big-endian

    return implementation


@overload(xxh3_64_of, jit_options={"nogil": True})
def _xxh3_64_of_compiled(data, start, length):
    def implementation(data, start, length):
        return _xxh3_128_call(_byte_pointer(data, np.uintp(start)), np.uintp(length))[0]

    return implementation


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
