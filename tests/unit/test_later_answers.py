"""An answer that comes later (`Later`, broker/context.py) must not keep its
request alive while it waits.

An acks=all produce waits for the followers after its appends; a connection may
have MAX_LATER_ANSWERS such answers waiting. The decoded request holds a copy of
the produce's records (up to a whole request), which nothing needs once the
appends are done. Held until the answer, it kept tens of MiB per broker in
memory at acks=all and made every new request land in fresh memory (issue 18:
3x the page faults per record, RF=3 acks=all CPU per record +8%).
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, replace
from typing import Any

from odradek.broker.apis import API_TABLE
from odradek.broker.context import Later
from odradek.broker.pipeline import RequestPipeline
from odradek.protocol import api
from tests.unit.test_api_table import Conn, Host, _frame, _response

K = api.ApiKey


@dataclass
class LaterConn(Conn):
    answers_later: bool = True


def test_a_later_answer_does_not_hold_its_request() -> None:
    async def run() -> None:
        seen: list[Any] = []
        release: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def wait_then_answer() -> dict[str, Any]:
            await release
            return {"responses": []}

        async def handler(node: Any, ctx: Any, request: Any) -> Later:
            assert ctx.may_answer_later
            seen.append(request)
            return Later(asyncio.ensure_future(wait_then_answer()))

        table = dict(API_TABLE)
        table[K.PRODUCE] = replace(API_TABLE[K.PRODUCE], handler=handler)
        pipeline = RequestPipeline(Host(), None, table=table)
        later = await pipeline.handle(_frame(K.PRODUCE, 9, 7), LaterConn())
        assert type(later) is Later
        await asyncio.sleep(0)  # the answer's task has started and waits
        assert not later.task.done()
        (request,) = seen
        seen.clear()
        # only this function's name and getrefcount's argument refer to it
        assert sys.getrefcount(request) == 2
        release.set_result(None)
        frame = await later.task
        assert _response(K.PRODUCE, 9, frame).responses == ()

    asyncio.run(run())
