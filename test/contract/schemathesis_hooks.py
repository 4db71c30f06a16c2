"""Schemathesis hooks of test/contract/schemathesis.e2e.test.ts (loaded through SCHEMATHESIS_HOOKS).

Only one hook: `filter_failure`, which drops a "Schema-valid request rejected" failure (ST202, the
positive_data_acceptance check) when the 400 is exactly a refusal the contract documents and the
OpenAPI document cannot express, because it compares two fields or depends on stored rows. Every
entry of the answer's `error.fields` must be excused, each by the rule cited beside it; any other
400 stays a failure. Every other check and failure is left alone.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis

MAX_ID = 2147483647

# Both forms of a surrogate / natural-key pair (docs/api.md "Errors": ambiguous_fields).
PAIRS = {
    "location_id": "location_external_key",
    "location_external_key": "location_id",
    "parent_id": "parent_external_key",
    "parent_external_key": "parent_id",
    "asset_id": "asset_external_key",
    "asset_external_key": "asset_id",
}


def _sent(case: Any) -> set[str]:
    """Names of the query parameters and top-level body keys the request carried."""
    names = set((case.query or {}).keys())
    if isinstance(case.body, dict):
        names |= set(case.body.keys())
    return names


def _excused(entry: dict[str, Any], case: Any) -> bool:
    field = str(entry.get("field", ""))
    code = entry.get("code")
    message = str(entry.get("message", ""))
    leaf = field.rsplit(".", 1)[-1]
    # docs/api.md "POST /locations" and "Lists: paging, sorting, filters, search": both forms of a
    # pair in a list filter or a POST /locations body → 400 ambiguous_fields (and on PATCH
    # /locations when they disagree).
    # Query parameters are independent in OpenAPI; the body's pair disagrees by stored rows.
    if code == "ambiguous_fields" and field in PAIRS and {field, PAIRS[field]} <= _sent(case):
        return True
    # docs/api.md "Errors": fk_not_found, "a reference (`parent_id`, `parent_external_key`, …)
    # names nothing live" (stored rows decide).
    if code == "fk_not_found":
        return True
    # docs/api.md "Import": the body of POST /imports is a file (CSV or XLSX) whose header row and
    # columns no JSON schema of a string can express; a file without them is refused on `file`.
    if field == "file" and case.method.upper() == "POST" and case.path == "/imports":
        return True
    # docs/api.md "Changing a record: PATCH": a read-only field in a PATCH body is accepted when it
    # equals the current value, refused with read_only when it differs (stored rows decide).
    if code == "read_only" and case.method.upper() == "PATCH":
        return True
    # docs/api.md "Alerts": a PATCH of a rule is judged merged with the stored rule, so whether
    # threshold_seconds is required (dwell_exceeded, not_seen) or refused (entered, left) depends on
    # the stored kind when the body names none (stored rows decide; POST's document says it).
    if field == "threshold_seconds" and case.method.upper() == "PATCH" and case.path.startswith("/alert-rules/") and code in ("required", "invalid_value"):
        return True
    # docs/api.md "Currently effective": "`valid_to` must be later than `valid_from`", else
    # invalid_value on valid_to (two fields compared; also on PATCH against the stored one).
    if code == "invalid_value" and leaf.endswith("valid_to") and message == "valid_to must be later than valid_from":
        return True
    # docs/api.md "Changing a record: PATCH": null clears only description, valid_to and a
    # location's parent, so null for a valid_from that is set is invalid_value, while null over a
    # null valid_from is the no-op of a verbatim round trip.
    if code == "invalid_value" and field == "valid_from" and case.method.upper() == "PATCH" and message == "valid_from must not be null":
        return True
    # docs/scan-ingestion.md "Handheld submissions": a read's observed_at is "at most 5 minutes
    # ahead of the server's clock (`invalid_value`)": the clock decides, which no schema can say.
    if code == "invalid_value" and leaf.endswith("observed_at") and "ahead of the server clock" in message:
        return True
    # docs/api.md "What text the service accepts": a number a 64-bit float cannot hold exactly
    # (1e309, 9007199254740993, -0) is refused rather than changed, in any field (metadata too);
    # JSON Schema has no keyword for it.
    if code == "invalid_value" and "cannot be stored exactly" in message:
        return True
    # docs/api.md "Ids": "body id fields carry no maximum there [...] and the server checks them"
    # (400 too_large, params.max 2147483647). Path and query ids do carry the maximum.
    if code == "too_large" and (entry.get("params") or {}).get("max") == MAX_ID and field not in (case.query or {}) and field not in (case.path_parameters or {}):
        return True
    return False


def _fields(response: Any) -> list[dict[str, Any]] | None:
    try:
        body = json.loads(response.content)
    except (ValueError, TypeError):
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or error.get("type") != "validation_error":
        return None
    fields = error.get("fields")
    return fields if isinstance(fields, list) and fields else None



@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """False drops the failure; True keeps it."""
    if getattr(failure, "code", None) != "ST202" or response.status_code != 400:
        return True
    # The stateful phase fills a path id from a nullable response field (an asset's location_id
    # while it has none) and sends "None": docs/api.md "Ids", a non-numeric path id is 400, and the
    # value is no integer, so the request was not schema-valid in the first place.
    if any(not isinstance(value, int) for value in (case.path_parameters or {}).values()):
        return False
    if case.method.upper() == "HEAD":
        # HEAD has no body to read the fields from: only the query's ambiguous pairs excuse it,
        # the same rule as its GET (which is checked with its body).
        sent = set((case.query or {}).keys())
        return not any(name in sent and partner in sent for name, partner in PAIRS.items())
    fields = _fields(response)
    if fields is None:
        return True
    return not all(_excused(entry, case) for entry in fields)
