# The C extension writer/_tsv.c: the rows of glretrace's TSV tables, parsed in C.

def next_header(text: str, pos: int, /) -> tuple[str | None, int, int]: ...
def parse_rows(
    text: str,
    pos: int,
    calls: bool,
    metrics: int,
    counter: int,
    names: list[str],
    interned: dict[str, str],
    /,
) -> tuple[int, int, int, bytes, bytes, bytes, tuple[bytes, ...], bytes, str | None]: ...
