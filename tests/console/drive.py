"""Drives the memd console in headless Chromium (selenium + Debian's chromedriver).

Run by tests/integration/console.rs against a live `memd serve`, which seeds a
group memory, a short-term chat memory, a category and a Markdown document
with raw HTML before this starts. Every check prints one line `ok <name>` or
`FAIL <name>: <why>`; the exit code is the number of failures (2 if it could
not run at all). Screenshots of every page go to --shots.
"""

import argparse
import json
import sys
import time
import urllib.parse

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

WAIT_S = 20
failures = []
overflowing = []  # phone-width pages wider than the screen


def check(name, cond, why=""):
    if cond:
        print(f"ok {name}", flush=True)
    else:
        failures.append(name)
        print(f"FAIL {name}: {why}", flush=True)


def browser(args, width, dark=False):
    opts = webdriver.ChromeOptions()
    opts.binary_location = args.chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              f"--window-size={width},900", "--hide-scrollbars", "--lang=en-US",
              "--force-device-scale-factor=1", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(executable_path=args.chromedriver), options=opts)
    d.set_page_load_timeout(WAIT_S)
    d.memd_width = width
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})
    if width < 500:
        d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": True})
    return d


def wait(d, css, gone=False):
    cond = EC.invisibility_of_element_located if gone else EC.presence_of_element_located
    return WebDriverWait(d, WAIT_S).until(cond((By.CSS_SELECTOR, css)))


def wait_for(d, fn, what):
    try:
        return WebDriverWait(d, WAIT_S).until(lambda _: fn())
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}") from None


def shot(d, args, name):
    # Full page height, so the screenshot shows the whole page.
    h = d.execute_script("return Math.min(document.documentElement.scrollHeight, 4000)")
    w = d.memd_width
    if w < 500 and d.execute_script("return Math.max(window.innerWidth, document.documentElement.scrollWidth)") > w:
        overflowing.append(name)
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": w, "height": max(h, 640), "deviceScaleFactor": 1, "mobile": w < 500})
    d.save_screenshot(f"{args.shots}/{name}.png")
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": w, "height": 900, "deviceScaleFactor": 1, "mobile": w < 500})


def go(d, args, hash_, css):
    d.get(args.url + "/#" + hash_)
    return wait(d, css)


def sign_in(d, args, token):
    d.get(args.url + "/")
    wait(d, "#token").send_keys(token)
    d.find_element(By.CSS_SELECTOR, "#signin-go").click()
    wait(d, "#nav-search")


def current_memory_id(d):
    frag = d.execute_script("return location.hash")
    return urllib.parse.unquote(frag.split("#/memory/", 1)[1]) if "#/memory/" in frag else None


def write_memory(d, args, text, tags=""):
    before = current_memory_id(d)
    go(d, args, "/write", "#w-text").send_keys(text)
    if tags:
        d.find_element(By.CSS_SELECTOR, "#w-tags").send_keys(tags)
    d.find_element(By.CSS_SELECTOR, "#write-go").click()
    wait_for(d, lambda: current_memory_id(d) not in (None, before) and d.find_elements(By.CSS_SELECTOR, "#m-text"), "the new memory's page")
    return current_memory_id(d)


def search(d, args, query):
    q = go(d, args, "/search", "#q")
    q.send_keys(query)
    d.find_element(By.CSS_SELECTOR, "#search-go").click()
    wait(d, "#result-count")
    cards = d.find_elements(By.CSS_SELECTOR, "#results article.memory")
    return [(c.get_attribute("data-id"), c) for c in cards]


def owner_flow(args):
    d = browser(args, 360)
    try:
        d.get(args.url + "/")
        wait(d, "#token")
        shot(d, args, "01-signin")
        sign_in(d, args, args.admin_token)
        check("sign in shows the token's name", d.find_element(By.ID, "token-name").text == "root")

        keep = write_memory(d, args, "周末和小明去西湖划船，记得带相机", "旅行, 西湖")
        shot(d, args, "03-memory")
        drop = write_memory(d, args, "旧的电话号码备注：请在下周前删除")
        xss = write_memory(d, args, 'XSS probe <img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> end')
        check("three memories written", all([keep, drop, xss]) and len({keep, drop, xss}) == 3, f"{keep} {drop} {xss}")

        # The XSS memory renders as text.
        text = wait(d, "#m-text")
        check("XSS memory shows its markup as text", "<img src=x" in text.text and "<script>" in text.text, text.text)
        check("XSS memory creates no element", not d.find_elements(By.CSS_SELECTOR, "#m-text img, #m-text script"))
        check("XSS memory runs nothing", d.execute_script("return window.__pwned === undefined"))

        hits = search(d, args, "西湖")
        ids = [i for i, _ in hits]
        check("Chinese search finds the memory", keep in ids, ids)
        marks = d.find_elements(By.CSS_SELECTOR, "#results mark")
        check("search highlights the terms", any("西湖" in m.text or m.text in "西湖" for m in marks), [m.text for m in marks])
        badges = d.find_elements(By.CSS_SELECTOR, "#results .b-scene")
        check("results carry scene badges", badges and badges[0].text == "main", [b.text for b in badges])
        shot(d, args, "02-search")
        seen = {c.find_element(By.CSS_SELECTOR, ".b-scene").text for _, c in hits}
        check("an all-scenes token finds the group's memory too", args.group_scene in seen, seen)
        q = go(d, args, "/search", "#q")
        q.send_keys("西湖")
        d.find_element(By.CSS_SELECTOR, 'input[name="scene"][value="%s"]' % args.group_scene).click()
        d.find_element(By.CSS_SELECTOR, "#search-go").click()
        wait(d, "#result-count")
        seen = {b.text for b in d.find_elements(By.CSS_SELECTOR, "#results .b-scene")}
        check("unticking a scene leaves it out of the search", seen == {"main"}, seen)

        # Open, then supersede.
        go(d, args, "/memory/" + keep, "#m-edit")
        edit = d.find_element(By.CSS_SELECTOR, "#m-edit")
        edit.clear()
        edit.send_keys("周末和小明去西湖划船，记得带相机和雨伞")
        d.find_element(By.CSS_SELECTOR, "#edit-go").click()
        wait_for(d, lambda: current_memory_id(d) not in (None, keep), "the new version's page")
        newer = current_memory_id(d)
        wait_for(d, lambda: d.find_elements(By.CSS_SELECTOR, "#history li"), "the history list")
        history = [a.get_attribute("href") for a in d.find_elements(By.CSS_SELECTOR, "#history a")]
        check("the new version lists the old one in its history", any(keep in h for h in history), history)
        check("the new version shows the new text", "雨伞" in d.find_element(By.ID, "m-text").text)

        # The old version's page is history: it names the newest, offers a restore, no edit or forget.
        go(d, args, "/memory/" + keep, "#superseded-note")
        links = [a.get_attribute("href") for a in d.find_elements(By.CSS_SELECTOR, "#newest-link a")]
        check("an old version names the newest", any(newer in h for h in links), links)
        check("an old version cannot be edited or forgotten",
              not d.find_elements(By.CSS_SELECTOR, "#edit-go, #forget-go"))
        check("an old version offers a restore", bool(d.find_elements(By.CSS_SELECTOR, "#restore-go")))

        # Forget another, with a reason.
        go(d, args, "/memory/" + drop, "#forget-go")
        d.find_element(By.ID, "forget-reason").send_keys("号码已过期")
        d.find_element(By.ID, "forget-go").click()
        d.find_element(By.ID, "forget-go").click()
        wait_for(d, lambda: "#/timeline" in d.current_url, "the timeline after forgetting")

        ids = [i for i, _ in search(d, args, "西湖")]
        check("search shows the new version", newer in ids, ids)
        check("search hides the superseded version", keep not in ids, ids)
        ids = [i for i, _ in search(d, args, "电话号码")]
        check("search hides the forgotten memory", drop not in ids, ids)

        go(d, args, "/timeline", "#timeline article")
        old = d.find_elements(By.CSS_SELECTOR, f'#timeline article[data-id="{keep}"]')
        check("timeline marks the superseded version", old and "superseded" in old[0].get_attribute("class"))
        check("timeline links the chain", old and newer in old[0].text, old[0].text if old else "")
        check("timeline drops the forgotten memory", not d.find_elements(By.CSS_SELECTOR, f'#timeline article[data-id="{drop}"]'))
        shot(d, args, "04-timeline")

        # Inbox: keep the seeded short-term memory now.
        go(d, args, "/inbox", "#inbox")
        shot(d, args, "05-inbox")
        buttons = d.find_elements(By.CSS_SELECTOR, "#inbox button.keep")
        check("the inbox lists the short-term memory", len(buttons) == 1, len(buttons))
        if buttons:
            buttons[0].click()
            wait(d, "#inbox a.mlink[href*='memory']")
            d.refresh()
            wait(d, "#inbox")
            check("kept memory leaves the inbox", not d.find_elements(By.CSS_SELECTOR, "#inbox button.keep"))

        # The Markdown document with raw HTML renders safely.
        go(d, args, "/documents", "#doc-q").send_keys("guide")
        d.find_element(By.ID, "doc-go").click()
        wait(d, "#documents article")
        shot(d, args, "06-documents")
        links = d.find_elements(By.CSS_SELECTOR, "#documents a.mlink")
        check("documents lists the Markdown file", len(links) >= 1, len(links))
        if links:
            links[0].click()
            wait(d, "#m-text.markdown h2")
            md = d.find_element(By.ID, "m-text")
            check("document headings render", md.find_elements(By.CSS_SELECTOR, "h2"))
            check("document raw HTML stays text", not md.find_elements(By.CSS_SELECTOR, "img, script, iframe") and "<img" in md.text, md.text)
            hrefs = [a.get_attribute("href") for a in md.find_elements(By.CSS_SELECTOR, "a")]
            check("document links are http(s) only", hrefs and all(h.startswith(("http:", "https:")) for h in hrefs), hrefs)
            check("document runs nothing", d.execute_script("return window.__pwned === undefined"))
            shot(d, args, "07-document")

        go(d, args, "/categories", "#categories a")
        shot(d, args, "08-categories")
        d.find_element(By.CSS_SELECTOR, "#categories a").click()
        wait(d, "#category-text")
        check("category content renders", "Tests first" in d.find_element(By.ID, "category-text").text)

        go(d, args, "/consolidation", "#runs a")
        shot(d, args, "09-consolidation")
        d.find_element(By.CSS_SELECTOR, "#runs a").click()
        wait(d, "#rollback-dry").click()
        wait(d, "#rollback-result pre")
        check("a run's report previews its rollback", "dry_run" in d.find_element(By.ID, "rollback-result").text)
        shot(d, args, "09b-consolidation-run")
        go(d, args, "/health", "#health-status")
        wait(d, "svg.chart")
        check("health draws the request chart", d.find_elements(By.CSS_SELECTOR, "svg.chart rect"))
        shot(d, args, "10-health")
        go(d, args, "/settings", "#settings-form input")
        limit = d.find_element(By.CSS_SELECTOR, 'input[name="search.defaultLimit"]')
        limit.clear()
        limit.send_keys("7")
        d.find_element(By.CSS_SELECTOR, "#settings-form button").click()
        wait_for(d, lambda: d.find_element(By.ID, "flash").text == "Saved", "the settings to save")
        check("settings save an editable key", True)
        shot(d, args, "11-settings")
        go(d, args, "/tokens", "#tokens article")
        names = [c.get_attribute("data-name") for c in d.find_elements(By.CSS_SELECTOR, "#tokens article")]
        check("tokens lists every token", {"root", "group", "spare"} <= set(names), names)
        revoke = d.find_element(By.CSS_SELECTOR, 'button.revoke[data-name="spare"]')
        revoke.click()
        revoke.click()
        wait_for(d, lambda: not d.find_elements(By.CSS_SELECTOR, 'button.revoke[data-name="spare"]'), "the revoked token")
        check("an admin token revokes another", True)
        shot(d, args, "12-tokens")

        csp = [e["message"] for e in d.get_log("browser") if "Content Security Policy" in e["message"]]
        check("no CSP violations", not csp, csp)
        return newer
    finally:
        d.quit()


def dark_and_desktop(args, newer):
    d = browser(args, 360, dark=True)
    try:
        sign_in(d, args, args.admin_token)
        search(d, args, "西湖")
        bg = d.execute_script("return getComputedStyle(document.body).backgroundColor")
        check("dark mode darkens the page", bg in ("rgb(20, 22, 26)",), bg)
        shot(d, args, "13-search-dark")
        go(d, args, "/memory/" + newer, "#m-text")
        shot(d, args, "14-memory-dark")
    finally:
        d.quit()
    d = browser(args, 1280)
    try:
        sign_in(d, args, args.admin_token)
        search(d, args, "西湖")
        shot(d, args, "15-search-desktop")
        go(d, args, "/health", "svg.chart")
        shot(d, args, "16-health-desktop")
    finally:
        d.quit()


def group_flow(args):
    d = browser(args, 360)
    try:
        sign_in(d, args, args.group_token)
        nav = [a.text for a in d.find_elements(By.CSS_SELECTOR, "#nav a")]
        check("a group token has no admin pages", "Tokens" not in nav and "Settings" not in nav, nav)
        hits = search(d, args, "西湖")
        scenes = {c.find_element(By.CSS_SELECTOR, ".b-scene").text for _, c in hits}
        check("a group token finds its scene's memory", len(hits) >= 1, len(hits))
        check("a group token sees only its scene", scenes == {args.group_scene}, scenes)
        shot(d, args, "17-group-search")
        go(d, args, "/timeline", "#timeline")
        # The entries arrive after the page: wait for them, not only the list.
        wait(d, "#timeline .b-scene")
        scenes = {b.text for b in d.find_elements(By.CSS_SELECTOR, "#timeline .b-scene")}
        check("a group token's timeline has only its scene", scenes == {args.group_scene}, scenes)
        d.execute_script("sessionStorage.clear()")
        d.get(args.url + "/#/tokens")
        wait(d, "#token")
        check("without a token the console asks to sign in", True)
    finally:
        d.quit()


def main():
    p = argparse.ArgumentParser()
    for a in ("--url", "--admin-token", "--group-token", "--group-scene", "--shots", "--chromedriver"):
        p.add_argument(a, required=True)
    p.add_argument("--chromium", default="/usr/bin/chromium")
    args = p.parse_args()
    started = time.monotonic()
    try:
        newer = owner_flow(args)
        dark_and_desktop(args, newer)
        group_flow(args)
        check("no horizontal overflow at 360 px", not overflowing, overflowing)
    except Exception as e:  # a step that could not run is a failure, with its reason
        failures.append("run")
        print(f"FAIL run: {type(e).__name__}: {e}", flush=True)
    print(json.dumps({"failures": failures, "seconds": round(time.monotonic() - started, 1)}), flush=True)
    sys.exit(min(len(failures), 100))


if __name__ == "__main__":
    main()
