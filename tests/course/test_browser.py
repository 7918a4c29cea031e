"""The course as a learner meets it, in a real browser: `make lab`, notebook 01's calculator, a slide deck.

    .venv/bin/pytest tests/course/test_browser.py -v -s     # screenshots and timings land in build/screenshots/

Playwright for Python drives Debian's Chromium (/usr/bin/chromium, headless). The JupyterLab under test is
started by `make lab` itself (on 127.0.0.1 with a token, its Jupyter folders in a temporary directory, autosave
off and checkpoints outside the repo, so the working tree is not written to), opened on a fresh workspace.
A learner's path: the course index, the link to notebook 01, Run > Run All Cells, then the calculator: doubling
the instance count must halve the days and keep the cost. Then deck 01, opened from file:// with the network
cut off, must render all its slides.

What is missing is installed (Chromium with apt-get as root, Playwright with pip; never `playwright install`,
which downloads a browser from a CDN). Under CI (CI=true) anything that cannot run is a failure; elsewhere
a skip that says why.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
NOTEBOOK = "notebooks/01_when_to_pretrain.ipynb"
DECK = "01_when_to_pretrain"
CALCULATOR_CONTROLS = ("model", "tokens", "instance", "count", "mfu", "sharding", "activation_checkpointing",
                       "activation_offloading")
TIMINGS: dict[str, float] = {}


def unavailable(reason: str):
    """Fail under CI, where the browser test must run; skip with the reason elsewhere."""
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"browser test cannot run under CI: {reason}", pytrace=False)
    pytest.skip(reason)


def _timed(name: str, start: float) -> float:
    TIMINGS[name] = round(time.perf_counter() - start, 1)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "browser-timings.json").write_text(json.dumps(TIMINGS, indent=2) + "\n")
    print(f"\n[timing] {name}: {TIMINGS[name]} s")
    return TIMINGS[name]


def ensure_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    if not shutil.which("apt-get") or os.geteuid() != 0:
        unavailable(f"{CHROMIUM} is missing; install it as root with `apt-get install -y chromium`")
    start = time.perf_counter()
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            unavailable(f"`{' '.join(command)}` failed: {done.stderr.strip()[-400:]}")
    _timed("chromium_install_s", start)


def ensure_playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "playwright>=1.65"],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            unavailable(f"cannot pip install playwright: {done.stderr.strip()[-400:]}")
        import importlib

        importlib.invalidate_caches()
        from playwright.sync_api import sync_playwright
    return sync_playwright


def _lab_settings(folder: Path) -> None:
    """User settings for the JupyterLab under test: no autosave, no news or update pop-ups."""
    settings = {
        "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
        "@jupyterlab/apputils-extension/notification": {"checkForUpdates": False, "fetchNews": "false"},
    }
    for plugin, values in settings.items():
        path = folder / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A Chromium context with a new empty profile; requests leaving this machine are aborted and listed.

    Every request the page makes is routed through this process, so it waits while the test is not inside a
    Playwright call: poll with page.wait_for_timeout, never time.sleep, while a page is open.
    """
    ensure_chromium()
    sync_playwright = ensure_playwright()
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1000})
        context.external_requests = []

        def guard(route):
            url = route.request.url
            if url.startswith(("file://", "data:", "blob:", "http://127.0.0.1:")):
                route.continue_()
            else:
                context.external_requests.append(url)
                route.abort()

        context.route("**/*", guard)
        yield context
        context.close()


LAB_START_TRIES = 3


def _serving_port(server: subprocess.Popen, runtime: Path, token: str, deadline: float) -> int | None:
    """The port JupyterLab serves on, once /api/status answers; None if the server exited first.

    The server picks its own port (--ServerApp.port=0) and writes it to jpserver-<pid>.json in its runtime folder.
    A port chosen here and handed over would be free only when chosen: during the seconds `make lab` takes to
    start, a notebook kernel in another test worker once bound it, and the poll below read ZeroMQ from it.
    """
    while time.perf_counter() < deadline:
        if server.poll() is not None:
            return None
        for info_file in runtime.glob("jpserver-*.json"):
            try:
                port = json.loads(info_file.read_text())["port"]
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2)
                return port
            except (OSError, ValueError, KeyError, http.client.HTTPException):
                pass  # not written in full yet, or not serving yet
        time.sleep(0.3)
    return None


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """JupyterLab as `make lab` starts it, on 127.0.0.1 with a token; yields (base_url, token, jupyter_dirs)."""
    if not shutil.which("make"):
        unavailable("`make` is missing (apt-get install -y make)")
    home = tmp_path_factory.mktemp("jupyter")
    dirs = {name: home / name for name in ("data", "config", "runtime", "settings", "workspaces", "checkpoints")}
    _lab_settings(dirs["settings"])
    env = dict(os.environ, JUPYTER_DATA_DIR=str(dirs["data"]), JUPYTER_CONFIG_DIR=str(dirs["config"]),
               JUPYTER_RUNTIME_DIR=str(dirs["runtime"]), JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
               JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]))
    token = secrets.token_hex(16)
    lab_args = (f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port=0 --IdentityProvider.token={token} "
                f"--FileCheckpoints.checkpoint_dir={dirs['checkpoints']}")
    log_path = home / "lab.log"
    start = time.perf_counter()
    for _ in range(LAB_START_TRIES):
        for stale in dirs["runtime"].glob("jpserver-*.json"):
            stale.unlink()
        with log_path.open("w") as log:
            # -o: never re-run the venv set-up from inside the tests; BIN: the interpreter running these tests
            server = subprocess.Popen(["make", "-o", ".venv/.installed", "lab", f"LAB_ARGS={lab_args}",
                                       f"BIN={Path(sys.executable).parent}"], cwd=ROOT, env=env, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        port = _serving_port(server, dirs["runtime"], token, deadline=start + 120)
        if port is not None:
            break
        _stop(server)
        # Between picking its free port and binding it the server can still lose it; then it exits, and runs again.
        if "no available port" not in log_path.read_text():
            break
    if port is None:
        pytest.fail(f"`make lab` did not serve JupyterLab:\n{log_path.read_text()[-2000:]}")
    try:
        _timed("make_lab_until_serving_s", start)
        yield f"http://127.0.0.1:{port}", token, dirs
    finally:
        _stop(server)


def _stop(server: subprocess.Popen) -> None:
    """Stop `make lab` and the jupyter server it started (one process group), which may have exited already."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def test_make_lab_registers_the_course_kernel(jupyterlab):
    base, token, dirs = jupyterlab
    with urllib.request.urlopen(f"{base}/api/kernelspecs?token={token}", timeout=10) as response:
        specs = json.load(response)["kernelspecs"]
    assert "fmlab" in specs, f"`make lab` registered no kernel named fmlab; found {sorted(specs)}"
    spec = specs["fmlab"]["spec"]
    assert spec["display_name"] == f"fmlab (Python {sys.version_info.major}.{sys.version_info.minor})"
    assert Path(spec["argv"][0]).parent == Path(sys.executable).parent  # this project's venv
    assert (dirs["data"] / "kernels" / "fmlab" / "kernel.json").exists()  # --user: seen by any Jupyter


def _active_notebook_state(page) -> dict:
    return page.evaluate("""() => {
        const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
        if (!panel) return {prompts: [], errors: []};
        const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim());
        const errors = [...panel.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
            .map(e => e.textContent).filter(t => t.includes('Traceback') || /^\\w+Error: /m.test(t));
        return {prompts, errors};
    }""")


def _wait_for_idle_kernel(page, base: str, token: str, notebook: str, timeout: float = 90) -> None:
    """Wait until `notebook` has an idle kernel, on the server and in the page.

    Run All on a notebook whose kernel is still starting clears every cell and runs none (JupyterLab's runCell
    gives up when the session has no kernel yet): that failed CI once on a loaded machine. The notebook's execution
    indicator is no sign of a kernel (it says 'idle' by default); the server's session list and the status bar are.
    """
    deadline, seen = time.perf_counter() + timeout, []
    while time.perf_counter() < deadline:
        with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=10) as response:
            sessions = json.load(response)
        seen = [(s.get("path"), (s.get("kernel") or {}).get("execution_state")) for s in sessions]
        status_bar = page.locator("#jp-main-statusbar").text_content() or ""
        if any(path == notebook and state == "idle" for path, state in seen) and re.search(r"\| Idle", status_bar):
            return
        page.wait_for_timeout(250)  # not time.sleep: the browser's requests wait on this process (see `browser`)
    page.screenshot(path=str(SCREENSHOTS / "jupyterlab-no-kernel.png"))
    pytest.fail(f"no idle kernel for {notebook} after {timeout:.0f} s; server sessions (path, state): {seen}; "
                f"status bar: {status_bar!r}")


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("$", "").strip())


def test_notebook_01_runs_and_its_calculator_responds(jupyterlab, browser):
    base, token, _ = jupyterlab
    page = browser.new_page()
    page.goto(f"{base}/lab/workspaces/fmlab-browser-test/tree/notebooks/index.ipynb?reset&token={token}")
    link = page.locator(".jp-RenderedMarkdown a", has_text="When to pretrain").first
    link.wait_for(timeout=60_000)
    page.screenshot(path=str(SCREENSHOTS / "jupyterlab-index.png"))
    link.click()  # as a learner does: the index links to the notebook
    current_tab = page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current")
    current_tab.filter(has_text=Path(NOTEBOOK).name).wait_for(timeout=30_000)
    _wait_for_idle_kernel(page, base, token, NOTEBOOK)

    start = time.perf_counter()
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").first.click()  # focus the notebook
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
    deadline = time.perf_counter() + 90
    while True:
        state = _active_notebook_state(page)
        assert not state["errors"], f"a cell of {NOTEBOOK} raised in JupyterLab:\n{state['errors'][0][-1500:]}"
        if state["prompts"] and all(re.fullmatch(r"\[\d+\]:", p) for p in state["prompts"]):
            break
        assert time.perf_counter() < deadline, f"Run All did not finish in 90 s; prompts: {state['prompts']}"
        page.wait_for_timeout(250)
    _timed("notebook_01_run_all_in_browser_s", start)

    days, cost = page.locator(".fmlab-calc-result .fmlab-days"), page.locator(".fmlab-calc-result .fmlab-cost")
    count = page.locator(".fmlab-calc-count input")
    days.wait_for(timeout=30_000)
    for control in CALCULATOR_CONTROLS:  # every control is labelled; numbers carry their unit and bounds
        label = page.locator(f".fmlab-calc-{control} .widget-label").first.text_content().strip()
        assert label, f"calculator control {control} has no label"
        if control in ("tokens", "count", "mfu"):
            assert re.search(r"\(.+\)", label), f"label {label!r} of {control} names no unit, e.g. 'Tokens (billions)'"
    for control in ("tokens", "count"):
        field = page.locator(f".fmlab-calc-{control} input")
        assert field.get_attribute("min") and field.get_attribute("max"), f"{control} input has no min/max"
    count.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "jupyterlab-01-calculator-before.png"))
    shown_before = days.text_content()
    days_before, cost_before = _number(shown_before), _number(cost.text_content())
    instances = int(count.input_value())
    assert days_before > 0 and cost_before > 0 and instances >= 1
    count.fill(str(2 * instances))
    count.press("Enter")
    count.press("Tab")  # blur as well, so the widget syncs its value to the kernel either way
    page.wait_for_function("([sel, old]) => document.querySelector(sel).textContent !== old",
                           arg=[".fmlab-calc-result .fmlab-days", shown_before], timeout=30_000)
    days_after, cost_after = _number(days.text_content()), _number(cost.text_content())
    page.locator(".fmlab-calc-result").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "jupyterlab-01-calculator.png"))
    # days are shown to 0.1: twice the instances is half the days, within that rounding
    assert days_after == pytest.approx(days_before / 2, abs=0.1), (days_before, days_after)
    assert cost_after == pytest.approx(cost_before, abs=1.0), "doubling the instances must not change the cost"
    assert not browser.external_requests, f"JupyterLab tried to reach the network: {browser.external_requests}"
    page.close()


@pytest.fixture(scope="module")
def built_decks():
    """Every course deck built to build/slides/ (what `make slides` does)."""
    from fmlab.course.slides import build_decks
    from fmlab.course.vendor import VendorError

    start = time.perf_counter()
    try:
        result = build_decks(ROOT / "slides", ROOT / "build" / "slides")
    except VendorError as e:
        unavailable(str(e))
    _timed("slides_build_s", start)
    return result


def test_slide_deck_renders_offline(browser, built_decks):
    from fmlab.course.slides import read_deck

    result = built_decks
    deck = read_deck(ROOT / "slides" / f"{DECK}.md")
    page = browser.new_page()
    requests, failures = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("requestfailed", lambda r: failures.append(r.url))
    page.goto((result.index.parent / f"{DECK}.html").as_uri())
    page.wait_for_function("() => window.Reveal && Reveal.isReady()", timeout=30_000)
    assert page.evaluate("Reveal.getTotalSlides()") == deck.slide_count
    assert page.evaluate("Reveal.getHorizontalSlides().length") == len(deck.stacks)
    assert deck.slide_count >= 5
    assert deck.title in page.locator(".reveal .slides section.present").first.text_content()
    page.screenshot(path=str(SCREENSHOTS / f"slides-{DECK}-title.png"))
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => Reveal.getIndices().h === 1")
    page.screenshot(path=str(SCREENSHOTS / f"slides-{DECK}-2.png"))
    math = page.locator(".reveal .math").count()
    assert page.locator(".reveal .math:not(:has(.katex))").count() == 0, "KaTeX left math untypeset"
    assert page.locator(".reveal .katex").count() >= math
    assert all(url.startswith(("file://", "data:")) for url in requests), [u for u in requests if "file" not in u]
    assert not failures, f"assets that did not load: {failures}"
    page.close()


def test_every_deck_renders_all_its_slides_within_the_slide(browser, built_decks):
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    for deck, built in zip(built_decks.decks, built_decks.pages, strict=True):
        page.goto(built.as_uri())
        page.wait_for_function("() => window.Reveal && Reveal.isReady()", timeout=30_000)
        assert page.evaluate("Reveal.getTotalSlides()") == deck.slide_count, built.name
        too_tall = page.evaluate("""() => Reveal.getSlides().flatMap(s => {
            const i = Reveal.getIndices(s); Reveal.slide(i.h, i.v);
            return s.scrollHeight > Reveal.getConfig().height ? [`${i.h + 1}.${(i.v || 0) + 1}: ${s.scrollHeight}px`] : [];
        })""")
        assert not too_tall, f"{built.name}: slides taller than the slide (cut off when shown): {too_tall}"
        assert page.locator(".reveal .math:not(:has(.katex))").count() == 0, f"{built.name}: math left untypeset"
    assert not errors, f"JavaScript errors in the decks: {errors}"
    page.close()
