"""The reason and fix codes: what a cleaning run says about each record, and what a dump's labels expect.

The cleaning pipeline (`labkit.cleaning`) reports them; the dirty-corpus generator
(`labkit.corpus`) writes them into labels.jsonl as the answer key; `labkit.cleaning.score`
compares the two.  This module is the one list of both vocabularies.
"""

from __future__ import annotations

# Reject reasons, in the order the cleaner checks them (the first that applies wins).
REASONS: dict[str, str] = {
    "unreadable": "the file could not be read",
    "empty": "the file is empty",
    "not_text": "binary data (gzip, zip, PDF, ...) where text was expected",
    "encoding_undecodable": "no encoding decodes the bytes cleanly",
    "malformed_record": "a JSONL line or CSV row that is not a record (truncated, not an object)",
    "misaligned_fields": "a CSV row with too many or too few fields",
    "mojibake": "U+FFFD or mojibake that cannot be undone",
    "title_missing": "no title",
    "title_too_short": "title shorter than the minimum",
    "title_too_long": "title longer than the maximum",
    "body_too_short": "body shorter than the minimum",
    "body_too_long": "body longer than the maximum (only with a maximum set)",
    "duplicate": "the same or nearly the same article as an earlier record",
    "processing_error": "a step raised on this record (the exception is the detail)",
}

# Fixes a kept record reports.
FIXES: dict[str, str] = {
    "decoded:gb18030": "bytes were GB2312/GBK/GB18030 (GB18030 is the superset, so this family reports one name)",
    "decoded:big5": "bytes were Big5 (traditional characters)",
    "decoded:utf-16": "bytes were UTF-16 with a BOM",
    "decoded:utf-32": "bytes were UTF-32 with a BOM",
    "bom_stripped": "a UTF-8 byte-order mark was removed",
    "charset_mismatch": "an HTML page's declared charset was wrong; the bytes were decoded as what they are",
    "html_extracted": "title/body were extracted from an HTML page with a parser (drops script/style/nav/footer)",
    "script_removed": "<script>/<style> markup found inside a text field was removed",
    "boilerplate_removed": "page-furniture lines (责任编辑, 版权所有, 点击查看更多...) were removed",
    "mojibake_repaired": "UTF-8 text mis-decoded as latin-1/cp1252 was repaired (ftfy)",
    "control_chars_removed": "C0 control characters / DEL were removed",
    "whitespace_normalized": "indentation, full-width spaces, tabs and blank lines were normalised",
    "fields_swapped": "a CSV row with title and body swapped was repaired",
}

# The corpus generator's defect names -> the code a correct cleaner reports for them.
DEFECT_REASONS: dict[str, str] = {
    "title_missing": "title_missing",
    "title_too_short": "title_too_short",
    "title_too_long": "title_too_long",
    "body_too_short": "body_too_short",
    "replacement_chars": "mojibake",
    "csv_misaligned": "misaligned_fields",
    "json_truncated": "malformed_record",
}
ENCODING_FIXES: dict[str, str] = {
    "gbk": "decoded:gb18030",
    "gb18030": "decoded:gb18030",
    "big5": "decoded:big5",
    "utf-16": "decoded:utf-16",
    "utf-8-sig": "bom_stripped",
}
# defects whose label lists no fix, but which a fix code reports
DEFECT_FIXES: dict[str, str] = {"meta_charset_lie": "charset_mismatch"}
