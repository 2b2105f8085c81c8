"""How cdc's processes run, under every stage: worker processes that end with their parent
(`lifeline`), the cycle collector paused around hot work, Arrow kept from importing pandas."""
