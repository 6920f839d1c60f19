def encode(
    rows: bytes | bytearray | memoryview, value: tuple[object, object, object],
    key: tuple[object, object, object] | None, headers: tuple[object, ...] | None, /,
) -> bytes: ...
def murmur2_partitions(
    rows: bytes | bytearray | memoryview, key: tuple[object, object, object],
    num_partitions: int, /,
) -> bytes: ...
