"""The workbench's web application (Starlette): pages rendered on the server from the run
store, a little script of our own, no CDN.

Security (docs/run-history.md, "Security"): every page is rendered by Jinja with
autoescaping, so whatever a results file or a review holds is shown as text; a
Content-Security-Policy lets only the workbench's own script and style run; requests whose
``Host`` is not the workbench's are refused (no other site can make its name point here and
read the store), and on another address than the loopback every request needs the access
token. Every write is a POST carrying the page's CSRF token from the workbench's own
origin. Runs are addressed by their id in the store, never by a file path.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import orjson
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agentv.errors import AgentVError
from agentv.store import RecordQuery, RunFilter, RunStore
from agentv.store.records import PAGE_SIZES, SORTS
from agentv.store.reviews import REASONS
from agentv.view.charts import Point, line_chart
from agentv.view.record import record_view

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    # a same-origin form's POST carries its Origin; "no-referrer" would make it "null"
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
#: the largest form body read (a review's comment and a few fields)
MAX_FORM_BYTES = 256 * 1024
TOKEN_COOKIE = "agentv_token"
STATIC = Path(__file__).parent / "static"


@dataclass(frozen=True)
class Settings:
    """What a workbench serves and how it is guarded."""

    store: Path
    origin: str
    hosts: frozenset[str] | None  # None: any Host (the token guards every request)
    token: str | None
    csrf: str
    reviewer: str | None
    cwd: Path


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class Guard:
    """Every request: its Host checked, the access token asked for when one is set, and
    the security headers added to every response."""

    def __init__(self, app: Any, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        request = Request(scope)
        settings = self.settings
        host = request.headers.get("host", "")
        if settings.hosts is not None and host not in settings.hosts:
            await _plain(400, "unknown Host: open the workbench by the address it printed")(
                scope, receive, secured
            )
            return
        if settings.token is not None:
            given = request.query_params.get("token")
            if given is not None and hmac.compare_digest(given, settings.token):
                # the token moves into a cookie, out of the address bar and the history
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
                response = RedirectResponse(target, status_code=303)
                response.set_cookie(TOKEN_COOKIE, settings.token, httponly=True, samesite="strict")
                await response(scope, receive, secured)
                return
            cookie = request.cookies.get(TOKEN_COOKIE, "")
            if not hmac.compare_digest(cookie, settings.token):
                await _plain(401, "the workbench needs its access token: open the URL it printed")(
                    scope, receive, secured
                )
                return
        await self.app(scope, receive, secured)


def _plain(status: int, text: str) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain; charset=utf-8")


# --- formatting, for the templates -----------------------------------------------------------


def _pct(value: Any) -> str:
    return "-" if not isinstance(value, int | float) else f"{value:.1%}"


def _num(value: Any, digits: int = 3) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}f}"


def _usd(value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    if value == 0:
        return "$0"
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.4f}" if value >= 0.0001 else f"${value:.2g}"


def _when(value: Any) -> str:
    return str(value or "")[:19].replace("T", " ")


def _seconds(value: Any) -> str:
    if not isinstance(value, int | float):
        return "-"
    if value < 60:
        return f"{value:.1f} s"
    return f"{int(value // 60)} min {value % 60:.0f} s"


def _environment(settings: Settings) -> Environment:
    env = Environment(
        loader=PackageLoader("agentv.view", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    cwd = settings.cwd

    def shown(path: Any) -> str:
        if not path:
            return "-"
        try:
            return str(Path(str(path)).relative_to(cwd))
        except ValueError:
            return str(path)

    def key(value: Any) -> str:
        return orjson.dumps(list(value)).decode()

    env.filters.update(pct=_pct, num=_num, usd=_usd, when=_when, seconds=_seconds, shown=shown)
    env.filters["key"] = key
    env.filters["name"] = lambda path: Path(str(path)).name if path else "-"
    env.globals.update(csrf=settings.csrf, reasons=REASONS)
    return env


# --- the application ------------------------------------------------------------------------


def make_app(settings: Settings) -> Any:
    """The workbench as an ASGI application."""
    env = _environment(settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        app.state.store = RunStore(settings.store)
        try:
            yield
        finally:
            app.state.store.close()

    def page(request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = env.get_template(name).render(request=request, **values)
        return HTMLResponse(html, status_code=status)

    def missing(request: Request, what: str) -> HTMLResponse:
        return page(request, "error.html.j2", status=404, message=what)

    def store(request: Request) -> RunStore:
        return request.app.state.store

    async def runs_page(request: Request) -> Response:
        q = request.query_params
        which = RunFilter(
            eval_file=q.get("eval_file") or None,
            target=q.get("target") or None,
            since=q.get("since") or None,
            until=q.get("until") or None,
            search=q.get("q") or None,
            limit=500,
        )
        found = store(request).runs(which)
        trends = store(request).trends([r.id for r in found])
        charts = []
        for (kind, name), points in trends.items():
            labels = [f"run {p.run_id}" for p in points]
            hrefs = [f"/runs/{p.run_id}" for p in points]
            row = {
                "kind": "target" if kind == "target" else "eval file",
                "name": name,
                "runs": len(points),
                "pass_rate": line_chart(
                    [
                        Point(lb, p.pass_rate, h)
                        for lb, p, h in zip(labels, points, hrefs, strict=True)
                    ],
                    title=f"pass rate of {name}",
                    top=1.0,
                    shown=_pct,
                ),
                "mean": line_chart(
                    [Point(lb, p.mean, h) for lb, p, h in zip(labels, points, hrefs, strict=True)],
                    title=f"mean score of {name}",
                    top=1.0,
                ),
                "cost": line_chart(
                    [
                        Point(lb, p.cost_usd, h)
                        for lb, p, h in zip(labels, points, hrefs, strict=True)
                    ],
                    title=f"cost of {name}",
                    shown=_usd,
                ),
            }
            charts.append(row)
        return page(request, "runs.html.j2", runs=found, charts=charts, q=q)

    async def run_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        run = store(request).run(run_id)
        if run is None:
            return missing(request, f"there is no run {run_id} in the store")
        q = request.query_params
        query = RecordQuery(
            status=q.get("status") or None,
            target=q.get("target") or None,
            search=q.get("q") or None,
            reviewed=q.get("reviewed") or None,
            sort=q.get("sort") if q.get("sort") in SORTS else "seq",
            descending=q.get("desc") == "1",
            page=_int(q.get("page"), 1),
            size=_int(q.get("size"), 100),
        )
        records = store(request).records(run_id, query)
        statuses, targets = store(request).facets(run_id)
        others = [r for r in store(request).runs(RunFilter(limit=200)) if r.id != run_id]

        def link(**change: Any) -> str:
            values = {k: v for k, v in q.items() if v}
            values.update({k: str(v) for k, v in change.items() if v is not None})
            return f"/runs/{run_id}?{urlencode(values)}"

        return page(
            request,
            "run.html.j2",
            run=run,
            summary=store(request).summary(run_id) or {},
            records=records,
            query=query,
            statuses=statuses,
            targets=targets,
            sizes=PAGE_SIZES,
            reviews=store(request).review_counts(run_id),
            flaky=store(request).flaky(run_id),
            others=others,
            link=link,
            q=q,
        )

    async def record_page(request: Request) -> Response:
        run_id, seq = request.path_params["run_id"], request.path_params["seq"]
        run = store(request).run(run_id)
        found = store(request).record(run_id, seq) if run is not None else None
        if run is None or found is None:
            return missing(request, f"there is no record {seq} in run {run_id}")
        row, result = found
        where = f"{Path(run.results_path or '').name}, line {row.line}"
        key = orjson.dumps(row.case_key).decode()
        latest = store(request).latest_seq(run_id, key, row.repeat)
        return page(
            request,
            "record.html.j2",
            run=run,
            row=row,
            view=record_view(result, where) if result is not None else None,
            reviews=store(request).reviews_of(run_id, key, row.repeat),
            reviewer=settings.reviewer or "",
            latest=latest,
            saved=request.query_params.get("saved") == "1",
            history=store(request).case_history(key),
        )

    async def review_post(request: Request) -> Response:
        run_id, seq = request.path_params["run_id"], request.path_params["seq"]
        form = await _checked_form(request, settings)
        if isinstance(form, Response):
            return form
        found = store(request).record(run_id, seq)
        if found is None:
            return missing(request, f"there is no record {seq} in run {run_id}")
        row, _ = found
        score_text = form.get("score", "").strip()
        try:
            score = float(score_text) if score_text else None
            store(request).review(
                run_id,
                orjson.dumps(row.case_key).decode(),
                row.repeat,
                verdict=form.get("verdict", ""),
                score=score,
                comment=form.get("comment", ""),
                reviewer=form.get("reviewer", "") or settings.reviewer or "",
            )
        except (ValueError, AgentVError) as exc:
            message = str(exc) if isinstance(exc, AgentVError) else f"not a score: {score_text!r}"
            return page(request, "error.html.j2", status=400, message=message)
        return RedirectResponse(f"/runs/{run_id}/records/{seq}?saved=1#reviews", status_code=303)

    async def compare_page(request: Request) -> Response:
        from agentv.results.compare import compare_files

        q = request.query_params
        base_id, new_id = _int(q.get("base"), 0), _int(q.get("new"), 0)
        base, new = store(request).run(base_id), store(request).run(new_id)
        all_runs = store(request).runs(RunFilter(limit=500))
        comparison = problem = None
        if base is None or new is None:
            problem = "choose two runs to compare" if not (base_id or new_id) else "no such run"
        elif base.missing or new.missing or not base.results_path or not new.results_path:
            problem = "a results file of these runs is missing: compare needs both files"
        else:
            try:
                comparison = compare_files(Path(base.results_path), Path(new.results_path))
            except AgentVError as exc:
                problem = str(exc)
        return page(
            request,
            "compare.html.j2",
            base=base,
            new=new,
            comparison=comparison,
            problem=problem,
            runs=all_runs,
        )

    async def case_page(request: Request) -> Response:
        key = request.query_params.get("key", "")
        try:
            parsed = orjson.loads(key)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, list) or not all(isinstance(k, str) for k in parsed):
            return missing(request, "no such case")
        history = store(request).case_history(orjson.dumps(parsed).decode())
        chart = line_chart(
            [
                Point(
                    f"run {r.run_id} #{r.repeat + 1}",  # repeats as people count them
                    r.score,
                    f"/runs/{r.run_id}/records/{r.seq}",
                )
                for r in history.runs
            ],
            title="score run after run",
            top=1.0,
        )
        return page(request, "case.html.j2", history=history, chart=chart)

    async def queue_page(request: Request) -> Response:
        items = store(request).queue(limit=300)
        return page(request, "queue.html.j2", items=items)

    async def calibrate_page(request: Request) -> Response:
        return page(request, "calibrate.html.j2", calibration=store(request).calibrate())

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204)  # the workbench has no icon: none is asked again

    async def not_found(request: Request, exc: Exception) -> Response:
        return missing(request, "there is no such page")

    routes = [
        Route("/", runs_page),
        Route("/runs/{run_id:int}", run_page),
        Route("/runs/{run_id:int}/records/{seq:int}", record_page),
        Route("/runs/{run_id:int}/records/{seq:int}/review", review_post, methods=["POST"]),
        Route("/compare", compare_page),
        Route("/cases", case_page),
        Route("/queue", queue_page),
        Route("/calibrate", calibrate_page),
        Route("/favicon.ico", no_icon),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found})
    return Guard(app, settings)


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


async def _checked_form(request: Request, settings: Settings) -> dict[str, str] | Response:
    """A POST's form, once its origin and CSRF token are checked (a 403 otherwise)."""
    host = request.headers.get("host", "")
    origin = request.headers.get("origin")
    own = f"http://{host}"
    if origin is not None:
        same = origin == own
    else:  # an older browser: its Referer says where the form was
        same = request.headers.get("referer", "").startswith(own + "/")
    if not same:
        return _plain(403, "refused: the request did not come from the workbench's own page")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return _plain(413, "the form is too large")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return _plain(400, "not a form")
    form = {k: v[-1] for k, v in fields.items()}
    if not hmac.compare_digest(form.get("csrf", ""), settings.csrf):
        return _plain(403, "refused: the page's token is missing or stale; reload the page")
    return form
