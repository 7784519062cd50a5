"""The asyncio client against the real daemon (each test runs its own event loop)."""

from __future__ import annotations

import asyncio

import pytest

from classifierd import AsyncClient, InvalidArgument, NoMatchPolicy, NotFound
from classifierd.types import ExposureEvent

from conftest import Daemon


def test_async_route_classify_analyze(daemon: Daemon) -> None:
    async def main() -> None:
        async with AsyncClient(daemon.address, timeout=10) as c:
            await asyncio.wait_for(c.wait_ready(), 10)
            route, cls, analysis = await asyncio.gather(
                c.route("Check my GitHub notifications"),
                c.classify("Check my GitHub notifications"),
                c.analyze_prompt("Check my GitHub notifications"),
            )
            assert route.servers[0].id == "github"
            assert cls.categories[0].id == "github"
            assert analysis.categories[0] == "github"
            none = await c.route("bake me a lasagna", on_no_match=NoMatchPolicy.NONE)
            assert none.abstained and none.applied_policy is NoMatchPolicy.NONE
            with pytest.raises(InvalidArgument):
                await c.classify("")
            with pytest.raises(NotFound):
                await c.list_tools("no-such-session")
            prompt = await c.terminal.detect_input_prompt(text="Enter password: ")
            assert prompt is not None and prompt.prompt_type == "password"

    asyncio.run(main())


def test_async_watch_exposure(daemon: Daemon) -> None:
    async def main() -> None:
        async with AsyncClient(daemon.address, timeout=10) as c:
            session = await c.create_session(default_exposure="meta-only")
            watch = await c.watch_exposure(session.id)
            events: list[ExposureEvent] = []

            async def collect() -> None:
                async for event in watch:
                    events.append(event)

            task = asyncio.create_task(collect())
            res = await c.analyze_prompt("Check my GitHub notifications", session_id=session.id)
            assert res.changed
            for _ in range(100):
                if events:
                    break
                await asyncio.sleep(0.1)
            assert len(events) == 1 and "github" in events[0].change.added
            got = await c.get_session(session.id)
            assert "github" in got.exposed_categories
            await c.delete_session(session.id)
            with pytest.raises(NotFound):  # deleting the session ends the iteration
                await asyncio.wait_for(task, 10)

            # cancel() ends an open watch quietly.
            other = await c.create_session()
            watch2 = await c.watch_exposure(other.id)
            task2 = asyncio.create_task(collect_into(watch2, []))
            await asyncio.sleep(0.2)
            watch2.cancel()
            await asyncio.wait_for(task2, 10)
            await c.delete_session(other.id)

    async def collect_into(watch: object, out: list[ExposureEvent]) -> None:
        from classifierd import AsyncExposureWatch

        assert isinstance(watch, AsyncExposureWatch)
        async for event in watch:
            out.append(event)

    asyncio.run(main())
