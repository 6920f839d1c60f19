"""The consumer group, transaction, producer, ACL and user pages."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable

from . import acls, chart, groups, topics, transactions, users
from .client import ConsoleError
from .pages_topics import confirm, failed, listing
from .server import Console, Request, Response, redirect

WATCH_S = 5  # a watched group's page reloads this often: a point of the lag chart each time


def groups_page(console: Console, req: Request) -> Response:
    return listing(console, "Consumer groups", "groups.html",
                   lambda: groups.groups(console.clients))


def group_page(console: Console, req: Request, group_id: str) -> Response:
    try:
        detail = groups.group(console.clients, group_id)
    except ConsoleError as e:
        return failed(console, f"Group {group_id}", str(e))
    points, top = chart.points(detail.lag_history)
    return console.render("group.html", title=f"Group {group_id}", g=detail, points=points,
                          top=top, done=req.arg("done"), resets=groups.RESETS,
                          watch=req.arg("watch") == "1", watch_s=WATCH_S)


def reset_group(console: Console, req: Request, group_id: str) -> Response:
    to, value = req.arg("to"), req.arg("value")
    try:
        detail = groups.group(console.clients, group_id)
        if not detail.inactive:
            raise ConsoleError(f"group {group_id} is {detail.state}: its offsets can only be "
                               "reset while it has no members")
        new = groups.new_offsets(console.clients, detail, to, value)
    except (ConsoleError, ValueError) as e:
        return failed(console, f"Group {group_id}", str(e), 409)
    if req.form.get("confirmed") != "yes":
        shown = "; ".join(f"{t}-{p}: {o}" for (t, p), o in sorted(new.items()))
        return confirm(console, req, f"Reset the offsets of {group_id}",
                       f"Set the committed offsets of group {group_id} to {shown or 'nothing'}?",
                       danger=True)
    try:
        groups.reset(console.clients, group_id, new)
    except ConsoleError as e:
        return failed(console, f"Group {group_id}", str(e), 409)
    return redirect(f"/groups/{urllib.parse.quote(group_id, safe='')}?done=offsets+reset")


def transactions_page(console: Console, req: Request) -> Response:
    return listing(console, "Transactions", "transactions.html",
                   lambda: transactions.transactions(console.clients))


def producers_page(console: Console, req: Request, name: str) -> Response:
    def fetch() -> list[transactions.Producer]:
        leaders = {p.id: p.leader for p in topics.partitions(console.clients, name)}
        return transactions.producers(console.clients, name, leaders)

    return listing(console, f"Producers of {name}", "producers.html", fetch, topic=name)


def acls_page(console: Console, req: Request) -> Response:
    return listing(console, "ACLs", "acls.html", lambda: acls.acls(console.clients),
                   done=req.arg("done"), types=acls.RESOURCE_TYPES, patterns=acls.PATTERNS,
                   operations=acls.OPERATIONS, permissions=acls.PERMISSIONS)


def change_acl(console: Console, req: Request, action: str) -> Response:
    try:
        acl = acls.Acl.from_form(req.form)
    except ValueError as e:
        return failed(console, "ACLs", str(e), 400)
    if req.form.get("confirmed") != "yes":
        return confirm(console, req, "ACLs", f"{action.title()} the ACL: {acl}?",
                       danger=action == "remove")
    try:
        if action == "add":
            acls.add(console.clients, acl)
            done = "added"
        else:
            done = f"removed {acls.remove(console.clients, acl)}"
    except (ConsoleError, OSError) as e:
        return failed(console, "ACLs", str(e))
    return redirect(f"/acls?done={urllib.parse.quote(done)}")


def users_page(console: Console, req: Request) -> Response:
    return listing(console, "Users", "users.html", lambda: users.users(console.clients),
                   done=req.arg("done"), mechanisms=users.MECHANISMS)


def change_user(console: Console, req: Request, action: str) -> Response:
    user, mechanism = req.arg("user"), req.arg("mechanism")
    if req.form.get("confirmed") != "yes":
        what = (f"Set the {mechanism} password of user {user}?" if action == "upsert"
                else f"Delete the {mechanism} credential of user {user}?")
        return confirm(console, req, "Users", what, danger=action == "delete")
    try:
        if action == "upsert":
            iterations = int(req.arg("iterations") or 4096)
            users.upsert(console.clients, user, mechanism, req.form.get("password", ""),
                         iterations)
        else:
            users.delete(console.clients, user, mechanism)
    except (ConsoleError, ValueError) as e:
        return failed(console, "Users", str(e))
    done = f"{'set' if action == 'upsert' else 'deleted'} {mechanism} of {user}"
    return redirect(f"/users?done={urllib.parse.quote(done)}")


PAGES: list[tuple[str, str, Callable[..., Response]]] = [
    ("GET", "/groups", groups_page),
    ("GET", r"/groups/([^/]+)", group_page),
    ("POST", r"/groups/([^/]+)/reset", reset_group),
    ("GET", "/transactions", transactions_page),
    ("GET", r"/topics/([^/]+)/producers", producers_page),
    ("GET", "/acls", acls_page),
    ("POST", "/acls/(add|remove)", change_acl),
    ("GET", "/users", users_page),
    ("POST", "/users/(upsert|delete)", change_user),
]


def register(console: Console) -> None:
    for method, path, handler in PAGES:
        console.route(method, path, handler)
