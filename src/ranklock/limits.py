"""Input limits, declared once.

Every limit here is checked where the input enters (the loaders, query and
filter parsing), so PostgreSQL never sees an input it would refuse, and the
error names the limit and the input's own size.  The README's Limits section lists them;
tests/test_input_errors.py checks that the docs and these values agree.
"""

from __future__ import annotations

__all__ = [
    "BIGINT_MAX",
    "BIGINT_MIN",
    "LIMITS",
    "MAX_DOC_ID_CHARS",
    "MAX_FILTER_CHARS",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_VALUES",
    "MAX_INFERRED_FIELDS",
    "MAX_K",
    "MAX_KEYWORD_CHARS",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_QUERY_CHARS",
    "MAX_ZIP_PART_BYTES",
    "MAX_ZIP_RATIO",
    "MAX_ZIP_TOTAL_BYTES",
]

#: Characters in a search query.  A query is a question, not a document; past
#: this size the lexical branch would exceed PostgreSQL's 1 MB tsvector limit
#: long before it said anything useful.
MAX_QUERY_CHARS = 10_000
#: Results of one search (`k`), and candidates per branch (`depth`, in SearchParams).
MAX_K = 10_000
#: Characters in a filter expression.
MAX_FILTER_CHARS = 10_000
#: Nesting of a filter: parentheses, `and`/`or` groups and `not`, counted together.
MAX_FILTER_DEPTH = 32
#: Values in one filter, over all its conditions (an `in` list of 10 counts 10).
MAX_FILTER_VALUES = 10_000
#: Characters in a document id: ids are a btree key, whose entries PostgreSQL caps at 2,704 bytes.
MAX_DOC_ID_CHARS = 512
#: Characters in one `keyword` / `keyword[]` value: each is an index key (btree or GIN), capped near 2.7 KB.
MAX_KEYWORD_CHARS = 512
#: Typed fields inferred at a collection's first ingest: each is a column and an index in every
#: snapshot, so a corpus with hundreds of metadata keys gets its most common ones typed, not all.
MAX_INFERRED_FIELDS = 32
#: A document's metadata as JSON, in bytes.  Metadata is a record about the document (dates, tags,
#: people), stored, shown and served with every hit; 64 KiB is thousands of tags.  A YAML alias bomb
#: in a note's front matter (a 364-byte note expanding to gigabytes) stops here, in bounded time.
MAX_METADATA_BYTES = 65_536
#: Nesting of a document's metadata (objects and lists in one another); a cyclic YAML alias is refused
#: before it is counted.
MAX_METADATA_DEPTH = 32
#: The uncompressed size of one part (member) of a zip-based file (.docx), in bytes.  Word's
#: document.xml for a 1,000-page book is about 20 MB; a zip bomb's part is gigabytes.
MAX_ZIP_PART_BYTES = 67_108_864
#: How many times larger than its compressed size a part may be once inflated.  WordprocessingML
#: compresses 5-20 times, its most repetitive tables about 100 times; a bomb over 300.  Parts under
#: 1 MiB uncompressed are not held to it (tiny repetitive parts inflate far).
MAX_ZIP_RATIO = 200
#: All parts of one zip-based file, uncompressed: its reader (python-docx) holds every part in memory,
#: images included; a .docx of a long illustrated report is tens of megabytes.
MAX_ZIP_TOTAL_BYTES = 268_435_456
#: The range of an `int` field (PostgreSQL bigint).
BIGINT_MIN = -(2**63)
BIGINT_MAX = 2**63 - 1

#: (name, value, what it bounds) for the docs and for error messages.
LIMITS: tuple[tuple[str, int, str], ...] = (
    ("MAX_QUERY_CHARS", MAX_QUERY_CHARS, "characters in a search query"),
    ("MAX_FILTER_CHARS", MAX_FILTER_CHARS, "characters in a filter expression"),
    ("MAX_FILTER_DEPTH", MAX_FILTER_DEPTH, "nesting depth of a filter (parentheses, and/or groups, not)"),
    ("MAX_FILTER_VALUES", MAX_FILTER_VALUES, "values in one filter, over all its conditions"),
    ("MAX_DOC_ID_CHARS", MAX_DOC_ID_CHARS, "characters in a document id"),
    ("MAX_KEYWORD_CHARS", MAX_KEYWORD_CHARS, "characters in one keyword or keyword[] value of a document"),
    ("MAX_INFERRED_FIELDS", MAX_INFERRED_FIELDS, "typed fields inferred from the metadata of a first ingest"),
    ("MAX_METADATA_BYTES", MAX_METADATA_BYTES, "bytes of one document's metadata as JSON"),
    ("MAX_METADATA_DEPTH", MAX_METADATA_DEPTH, "nesting depth of one document's metadata (objects and lists)"),
    ("MAX_ZIP_PART_BYTES", MAX_ZIP_PART_BYTES, "uncompressed bytes of one part of a .docx (zip) file"),
    ("MAX_ZIP_RATIO", MAX_ZIP_RATIO, "inflation ratio of one part of a .docx (zip) file over 1 MiB"),
    ("MAX_ZIP_TOTAL_BYTES", MAX_ZIP_TOTAL_BYTES, "uncompressed bytes of all parts of a .docx (zip) file"),
)
