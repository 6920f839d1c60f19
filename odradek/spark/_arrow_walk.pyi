def scan(
    blob: bytes | bytearray | memoryview, count: int, lo: int, hi: int, base_offset: int,
    base_timestamp: int, pos_base: int, /,
) -> tuple[int, bytes, bytes, bytes, bytes, bytes] | None: ...
