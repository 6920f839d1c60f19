"""The controller's ACL decisions: CreateAcls and DeleteAcls into records.

Pure, as `controller.py`: the image and the request in, per-item results and
the records to append out. An ACL is stored once per binding: creating one
that exists already succeeds without a record (Kafka's StandardAuthorizer
does the same); each new binding gets a random id, and deletion writes one
RemoveAccessControlEntryRecord per ACL a filter matched (an ACL matched by
several filters of one request is removed once and reported by each).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..security.acl import AclBinding, AclFilter
from . import records as R
from .image import MetadataImage, acl_record

NONE = 0
INVALID_REQUEST = 42

# Kafka's StandardAuthorizer refuses to hold more; a bound on the image's size.
MAX_ACLS = 100_000


@dataclass(slots=True)
class AclResult:
    error_code: int = NONE
    error_message: str | None = None


@dataclass(slots=True)
class AclDeletion:
    error_code: int = NONE
    error_message: str | None = None
    deleted: list[AclBinding] = field(default_factory=list)


def create_acls(image: MetadataImage, bindings: Sequence[AclBinding],
                ) -> tuple[list[AclResult], list[R.MetadataRecord]]:
    existing = set(image.acls.values())
    results: list[AclResult] = []
    records: list[R.MetadataRecord] = []
    for binding in bindings:
        problem = binding.problem()
        if problem is not None:
            results.append(AclResult(INVALID_REQUEST, problem))
            continue
        if binding in existing:
            results.append(AclResult())
            continue
        if len(existing) >= MAX_ACLS:
            results.append(AclResult(INVALID_REQUEST, f"More than {MAX_ACLS} ACLs"))
            continue
        existing.add(binding)
        records.append(acl_record(str(uuid.uuid4()), binding))
        results.append(AclResult())
    return results, records


def delete_acls(image: MetadataImage, filters: Sequence[AclFilter],
                ) -> tuple[list[AclDeletion], list[R.MetadataRecord]]:
    results: list[AclDeletion] = []
    records: list[R.MetadataRecord] = []
    removed: set[str] = set()
    for f in filters:
        problem = f.problem()
        if problem is not None:
            results.append(AclDeletion(INVALID_REQUEST, problem))
            continue
        deletion = AclDeletion()
        for acl_id, acl in sorted(image.acls.items()):
            if not f.matches(acl):
                continue
            deletion.deleted.append(acl)
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(R.remove_access_control_entry_record(acl_id))
        results.append(deletion)
    return results, records
