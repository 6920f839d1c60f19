"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).

Credentials live in the metadata log as Kafka's UserScramCredentialRecord /
RemoveUserScramCredentialRecord; a client sends the salted password (never
the password) and the controller stores the salt, the iterations, StoredKey
and ServerKey. Alter is forwarded to the active controller by a broker-only
node (apis.py); Describe is answered from the node's image, as in Kafka.

Validation is Kafka's ScramControlManager's, per user: a user's alterations
all apply or none does, and the answer has one result per user named.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ...metadata import records as R
from ...metadata.image import MetadataImage
from ...protocol import errors as E
from ...security import scram
from ..context import RequestContext
from ..services import ScramServices


async def handle_describe_user_scram_credentials(
    broker: ScramServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    image = broker.image
    by_user: dict[str, list[dict[str, int]]] = {}
    for (name, mechanism), cred in sorted(image.scram_credentials.items()):
        by_user.setdefault(name, []).append(
            {"mechanism": mechanism, "iterations": cred.iterations})
    if not req.users:  # null or empty: every user
        return {"error_code": 0, "error_message": None, "results": [
            {"user": name, "error_code": 0, "error_message": None, "credential_infos": infos}
            for name, infos in by_user.items()]}
    counts = Counter(u.name for u in req.users)
    results = []
    for name in dict.fromkeys(u.name for u in req.users):
        if counts[name] > 1:
            results.append({"user": name, "error_code": E.DUPLICATE_RESOURCE,
                            "error_message": "Cannot describe SCRAM credentials for the same "
                                             "user twice in a single request",
                            "credential_infos": []})
        elif name not in by_user:
            results.append({"user": name, "error_code": E.RESOURCE_NOT_FOUND,
                            "error_message": "Attempt to describe nonexistent user.",
                            "credential_infos": []})
        else:
            results.append({"user": name, "error_code": 0, "error_message": None,
                            "credential_infos": by_user[name]})
    return {"error_code": 0, "error_message": None, "results": results}


async def handle_alter_user_scram_credentials(
    broker: ScramServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    async with broker.metadata_lock:
        results, records = alter_user_scram_credentials(
            broker.image,
            [(d.name, d.mechanism) for d in req.deletions],
            [(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
             for u in req.upsertions])
        if records:
            await broker.quorum.commit(records)
    return {"results": [{"user": user, "error_code": code, "error_message": message}
                        for user, (code, message) in results.items()]}


def alter_user_scram_credentials_errors(req: Any, code: int, message: str
                                        ) -> dict[str, Any]:
    """A refused AlterUserScramCredentials (no ALTER on the cluster): Kafka answers
    each user named in the request with the error (no top-level error code)."""
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return {"results": [{"user": user, "error_code": code, "error_message": message}
                        for user in users]}


Upsertion = tuple[str, int, int, bytes, bytes]  # name, mechanism, iterations, salt, salted


def alter_user_scram_credentials(
    image: MetadataImage, deletions: list[tuple[str, int]], upsertions: list[Upsertion],
) -> tuple[dict[str, tuple[int, str | None]], list[R.MetadataRecord]]:
    """Pure: (result per user, in request order; the records to append)."""
    results: dict[str, tuple[int, str | None]] = {}
    per_user: dict[str, list[R.MetadataRecord]] = {}
    seen = Counter([(n, m) for n, m in deletions] + [(u[0], u[1]) for u in upsertions])

    def fail(user: str, code: int, message: str) -> None:
        if results.get(user, (0, None))[0] == 0:
            results[user] = (code, message)

    for name, mechanism in deletions:
        results.setdefault(name, (0, None))
        error = _check(name, mechanism, seen)
        if error is None and (name, mechanism) not in image.scram_credentials:
            error = (E.RESOURCE_NOT_FOUND,
                     "Attempt to delete a user credential that does not exist")
        if error is not None:
            fail(name, *error)
            continue
        per_user.setdefault(name, []).append(
            R.remove_user_scram_credential_record(name, mechanism))
    for name, mechanism, iterations, salt, salted in upsertions:
        results.setdefault(name, (0, None))
        error = _check(name, mechanism, seen)
        if error is None and iterations < scram.MIN_ITERATIONS:
            error = (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif error is None and iterations > scram.MAX_ITERATIONS:
            error = (E.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif error is None and (not salt or not salted):
            error = (E.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        if error is not None:
            fail(name, *error)
            continue
        cred = scram.credential_from_salted(scram.MECHANISM_IDS[mechanism], salted, salt,
                                            iterations)
        per_user.setdefault(name, []).append(R.user_scram_credential_record(
            name, mechanism, cred.salt, cred.stored_key, cred.server_key, cred.iterations))
    records = [rec for user, recs in per_user.items() if results[user][0] == 0
               for rec in recs]
    return results, records


def _check(name: str, mechanism: int, seen: Counter[tuple[str, int]]) -> tuple[int, str] | None:
    if not name:
        return E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in scram.MECHANISM_IDS:
        return E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if seen[(name, mechanism)] > 1:
        return (E.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request")
    return None
