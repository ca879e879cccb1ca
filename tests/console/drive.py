"""Drives the memd console in headless Chromium (selenium + Debian's chromedriver).

Run by tests/integration/console.rs against a live `memd serve` that it seeded
with memories in six scenes (chat from named senders in two groups, a private
chat, the pet, the owner), Markdown documents, a category, a consolidation run
and a short-term line. Every check prints one line `ok <name>` or
`FAIL <name>: <why>`; the checks named `item N: …` cover the numbered items of
the console's issue. The exit code is the number of failures (2 if it could not
run at all). A tour takes a screenshot of every page at 1280x800 and 390x844,
light and dark, into --shots, and runs axe-core (--axe, injected by the test,
never loaded by the console) on each.
"""

import argparse
import json
import re
import sys
import time
import urllib.parse

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from selenium.webdriver.remote.webelement import WebElement

WAIT_S = 20
_click = WebElement.click


def _centered_click(self):
    # A person scrolls to what they press: clicks land clear of the sticky header.
    self.parent.execute_script("arguments[0].scrollIntoView({block: 'center'})", self)
    _click(self)


WebElement.click = _centered_click
failures = []
overflowing = []  # phone-width pages wider than the screen
axe_problems = []  # serious or critical violations, per page


def check(name, cond, why=""):
    if cond:
        print(f"ok {name}", flush=True)
    else:
        failures.append(name)
        print(f"FAIL {name}: {why}", flush=True)


def browser(args, width, height, dark=False):
    opts = webdriver.ChromeOptions()
    opts.binary_location = args.chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              f"--window-size={width},{height}", "--hide-scrollbars", "--lang=en-US",
              "--force-device-scale-factor=1", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(executable_path=args.chromedriver), options=opts)
    d.set_page_load_timeout(WAIT_S)
    d.set_script_timeout(60)
    d.memd_size = (width, height)
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})
    metrics(d, height)
    return d


def metrics(d, height):
    w = d.memd_size[0]
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": w, "height": height, "deviceScaleFactor": 1, "mobile": w < 500})


def wait(d, css, gone=False):
    cond = EC.invisibility_of_element_located if gone else EC.presence_of_element_located
    try:
        return WebDriverWait(d, WAIT_S).until(cond((By.CSS_SELECTOR, css)))
    except TimeoutException:
        main = d.execute_script("const m = document.querySelector('main'); return m ? m.innerText.slice(0, 300) : ''")
        logs = [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE"][-3:]
        raise AssertionError(f"timed out waiting for {css} at {frag(d)}: {main!r} {logs}") from None


def wait_for(d, fn, what):
    try:
        return WebDriverWait(d, WAIT_S).until(lambda _: fn())
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}") from None


def shot(d, args, name):
    """A full-page screenshot (up to 4000 px tall) at the browser's width."""
    w, h = d.memd_size
    if w < 500 and d.execute_script("return Math.max(window.innerWidth, document.documentElement.scrollWidth)") > w:
        overflowing.append(name)
    full = d.execute_script("return Math.min(document.documentElement.scrollHeight, 4000)")
    metrics(d, max(full, h))
    d.save_screenshot(f"{args.shots}/{name}.png")
    metrics(d, h)


def axe(d, args, name):
    """Runs axe-core on the page; records serious and critical violations."""
    if not d.execute_script("return typeof window.axe === 'object'"):
        d.execute_script(args.axe_source)
    result = d.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then(r => done(r.violations.map("
        "v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))))"
        ".catch(e => done([{id: 'axe-error', impact: 'critical', nodes: [String(e)]}]));")
    bad = [v for v in result if v["impact"] in ("serious", "critical")]
    for v in bad:
        axe_problems.append(f"{name}: {v['id']} ({v['impact']}) {v['nodes']}")
    return bad


def go(d, args, hash_, css):
    d.get(args.url + "/#" + hash_)
    return wait(d, css)


def sign_in(d, args, token):
    d.get(args.url + "/")
    d.execute_script("sessionStorage.clear()")
    d.refresh()
    wait(d, "#token").send_keys(token)
    d.find_element(By.CSS_SELECTOR, "#signin-go").click()
    wait(d, "#nav-search")


def frag(d):
    return urllib.parse.unquote(d.execute_script("return location.hash"))


def current_memory_id(d):
    f = frag(d)
    return f.split("#/memory/", 1)[1].split("?")[0] if "#/memory/" in f else None


def hit_ids(d):
    return [c.get_attribute("data-id") for c in d.find_elements(By.CSS_SELECTOR, "#results article.memory")]


def search(d, args, query):
    q = go(d, args, "/search", "#q")
    q.clear()
    q.send_keys(query)
    d.find_element(By.CSS_SELECTOR, "#search-go").click()
    wait_for(d, lambda: "q=" in frag(d) and any(e.text for e in d.find_elements(By.CSS_SELECTOR, "#result-count")), "the results")
    return hit_ids(d)


def write_memory(d, args, text, tags="", title="", kind="", when=""):
    before = current_memory_id(d)
    go(d, args, "/write", "#w-text").send_keys(text)
    for css, value in (("#w-tags", tags), ("#w-title", title), ("#w-time", when)):
        if value:
            d.find_element(By.CSS_SELECTOR, css).send_keys(value)
    if kind:
        Select(d.find_element(By.ID, "w-kind")).select_by_value(kind)
    d.find_element(By.CSS_SELECTOR, "#write-go").click()
    wait_for(d, lambda: current_memory_id(d) not in (None, before) and d.find_elements(By.CSS_SELECTOR, "#m-text"),
             "the new memory's page")
    return current_memory_id(d)


def click(d, el):
    """Clicks `el` after scrolling it to the middle of the screen (clear of the sticky header)."""
    d.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
    el.click()
    return el


def texts(d, css):
    return [e.text for e in d.find_elements(By.CSS_SELECTOR, css)]


def item1_search(d, args):
    go(d, args, "/search", "#results h2")
    check("item 1: the search page starts with the latest memories",
          "Latest" in d.find_element(By.CSS_SELECTOR, "#results h2").text and d.find_elements(By.CSS_SELECTOR, "#results article"))
    mode = Select(d.find_element(By.ID, "mode")).first_selected_option.get_attribute("value")
    check("item 1: the default mode is the API's (hybrid)", mode == "hybrid", mode)
    ids = search(d, args, "apple")
    check("item 1: the query is in the URL", "q=apple" in frag(d), frag(d))
    check("item 1: a full first page and a More button", len(ids) == 10 and d.find_element(By.ID, "more").is_displayed(), len(ids))
    d.find_element(By.ID, "more").click()
    wait_for(d, lambda: len(hit_ids(d)) > 10, "the second page")
    more = hit_ids(d)
    check("item 1: More shows the rest, without repeats", len(more) == 14 and len(set(more)) == 14, len(more))
    check("item 1: the page shown is in the URL", "page=2" in frag(d), frag(d))
    body = d.find_element(By.ID, "results").text
    check("item 1: no raw score is shown", "score" not in body and "0.0" not in body, body[:200])
    whys = texts(d, "#results .why")
    check("item 1: every hit says why it matched", len(whys) == len(more) and all(whys), whys[:3])
    # Scenes and mode in the URL; Back restores the search.
    click(d, d.find_element(By.CSS_SELECTOR, 'input[name="scene"][value="%s"]' % args.group_scene))
    Select(d.find_element(By.ID, "mode")).select_by_value("fulltext")
    d.find_element(By.ID, "search-go").click()
    wait_for(d, lambda: "mode=fulltext" in frag(d), "the mode in the URL")
    check("item 1: scenes are in the URL", "scenes=" in frag(d) and args.group_scene not in frag(d).split("scenes=")[1], frag(d))
    go(d, args, "/timeline", "#timeline article")
    d.back()
    wait_for(d, lambda: d.find_elements(By.CSS_SELECTOR, "#results article.memory"), "the search after Back")
    check("item 1: Back brings the search back",
          d.find_element(By.ID, "q").get_attribute("value") == "apple"
          and Select(d.find_element(By.ID, "mode")).first_selected_option.get_attribute("value") == "fulltext", frag(d))
    d.get(args.url + "/#/search?q=%E8%A5%BF%E6%B9%96")
    wait_for(d, lambda: d.find_elements(By.CSS_SELECTOR, "#results article.memory"), "a bookmarked search")
    check("item 1: a bookmarked search runs", d.find_element(By.ID, "q").get_attribute("value") == "西湖")


def item2_versions(d, args, keep):
    go(d, args, "/memory/" + keep, "#m-edit")
    edit = d.find_element(By.CSS_SELECTOR, "#m-edit")
    edit.clear()
    edit.send_keys("周末和小明去西湖划船，记得带相机和雨伞")
    d.find_element(By.CSS_SELECTOR, "#edit-go").click()
    wait_for(d, lambda: current_memory_id(d) not in (None, keep), "the new version's page")
    newer = current_memory_id(d)
    wait_for(d, lambda: d.find_elements(By.CSS_SELECTOR, "#history li"), "the history list")
    check("the new version shows the new text", "雨伞" in d.find_element(By.ID, "m-text").text)
    check("item 2: history looks backwards", d.find_elements(By.CSS_SELECTOR, f'#history li[data-id="{keep}"]'))
    go(d, args, "/memory/" + keep, "#superseded-note")
    wait_for(d, lambda: d.find_elements(By.CSS_SELECTOR, "#history li"), "the old version's history")
    links = [a.get_attribute("href") for a in d.find_elements(By.CSS_SELECTOR, "#newest-link a")]
    check("an old version names the newest", any(newer in h for h in links), links)
    check("item 2: an old version says it was replaced", "replaced" in d.find_element(By.ID, "superseded-note").text)
    check("an old version cannot be edited or forgotten", not d.find_elements(By.CSS_SELECTOR, "#edit-go, #forget-go"))
    check("item 2: history looks forwards too", d.find_elements(By.CSS_SELECTOR, f'#history li[data-id="{newer}"]'))
    return newer


def item2_forget(d, args, drop):
    go(d, args, "/memory/" + drop, "#forget-go")
    d.find_element(By.ID, "forget-reason").send_keys("号码已过期")
    check("item 2: the confirm step shows only when asked", not d.find_element(By.ID, "forget-confirm").is_displayed())
    d.find_element(By.ID, "forget-go").click()
    confirm = wait(d, "#forget-confirm")
    color = d.execute_script("return getComputedStyle(arguments[0]).backgroundColor", confirm)
    check("item 2: the confirm step is a red button", color == "rgb(198, 40, 40)", color)
    confirm.click()
    wait_for(d, lambda: "#/timeline" in d.current_url, "the timeline after forgetting")
    undo = wait(d, "#undo-forget")
    check("item 2: forgetting offers an undo", undo.is_displayed())
    undo.click()
    wait_for(d, lambda: current_memory_id(d) == drop, "the restored memory")
    check("item 2: undo brings the memory back", "电话号码" in wait(d, "#m-text").text)
    d.find_element(By.ID, "forget-go").click()
    wait(d, "#forget-confirm").click()
    wait_for(d, lambda: "#/timeline" in d.current_url, "the timeline after forgetting again")
    go(d, args, "/forgotten", f'#forgotten article[data-id="{drop}"]')
    check("item 2: forgotten memories can be seen", True)
    shot(d, args, "forgotten-phone-light-forgotten")
    d.find_element(By.CSS_SELECTOR, f'#forgotten button.restore[data-id="{drop}"]').click()
    wait_for(d, lambda: current_memory_id(d) == drop, "the memory restored from Forgotten")
    check("item 2: a forgotten memory can be restored from the list", True)
    d.find_element(By.ID, "forget-go").click()
    wait(d, "#forget-confirm").click()
    wait_for(d, lambda: "#/timeline" in d.current_url, "the timeline after the last forget")


def item3_documents(d, args):
    go(d, args, "/documents", "#documents article")
    titles = texts(d, "#documents article h3")
    check("item 3: documents are listed without a search", {"西湖 guide", "Garden notes"} <= set(titles), titles)
    link = [a for a in d.find_elements(By.CSS_SELECTOR, "#documents article h3 a") if a.text == "西湖 guide"][0]
    link.click()
    wait(d, "#m-text.markdown table")
    md = d.find_element(By.ID, "m-text")
    check("item 3: tables render as tables", md.find_elements(By.CSS_SELECTOR, "td") and "|" not in md.find_element(By.CSS_SELECTOR, "table").text)
    check("item 3: heading levels are kept", md.find_elements(By.CSS_SELECTOR, "h3") and md.find_elements(By.CSS_SELECTOR, "h4"),
          [e.tag_name for e in md.find_elements(By.CSS_SELECTOR, "h2, h3, h4")])
    heads = [e.text for e in d.find_elements(By.CSS_SELECTOR, "main h1, main h2, main h3")]
    check("item 3: the title appears once", heads.count("西湖 guide") == 1, heads)
    check("item 3: no tag remove button on a document", not d.find_elements(By.CSS_SELECTOR, "button.x"))
    check("document raw HTML stays text", not md.find_elements(By.CSS_SELECTOR, "img, script, iframe") and "<img" in md.text, md.text)
    hrefs = [a.get_attribute("href") for a in md.find_elements(By.CSS_SELECTOR, "a")]
    check("document links are http(s) only", hrefs and all(h.startswith(("http:", "https:")) for h in hrefs), hrefs)
    check("document runs nothing", d.execute_script("return window.__pwned === undefined"))
    # A search hit on a section opens the whole document.
    go(d, args, "/documents?q=trowel", "#documents article h3 a").click()
    wait(d, "#m-text.markdown table")
    check("item 3: a section found by search opens its whole document", "Intro" in d.find_element(By.ID, "m-text").text)


def item4_chat(d, args, group_memory):
    ids = search(d, args, "荷花")
    page = d.find_element(By.ID, "results").text
    check("item 4: senders are shown by name", "from 小王" in page, page[:300])
    check("item 4: no raw sender ids", "#from:" not in page and "from:10005" not in page, page[:300])
    go(d, args, "/memory/" + group_memory, "#m-text")
    note = d.find_elements(By.ID, "read-only-note")
    check("item 4: the owner is told why a group memory cannot be changed here",
          note and "Group 1" in note[0].text and not d.find_elements(By.CSS_SELECTOR, "#edit-go"), note[0].text if note else "")
    go(d, args, "/inbox", "#inbox article")
    why = d.find_elements(By.ID, "inbox-why")
    keeps = d.find_elements(By.CSS_SELECTOR, "#inbox button.keep")
    readonly = d.find_elements(By.CSS_SELECTOR, "#inbox .read-only")
    check("item 4: the inbox offers Keep only where it can, and says why not elsewhere",
          len(keeps) == 1 and len(readonly) >= 1 and why, (len(keeps), len(readonly)))
    return ids


def item5_words(d, args):
    go(d, args, "/timeline", "#timeline article")
    words = set(texts(d, "#timeline .badge"))
    jargon = words & {"normal", "t0", "t1", "t2", "t3", "long", "short", "note", "main", "expiring soon"}
    check("item 5: cards carry no jargon badges", not jargon, jargon)
    lock = d.find_elements(By.CSS_SELECTOR, "#timeline .b-privacy svg.icon")
    check("item 5: privacy is a lock and a word", lock and "Personal" in d.find_element(By.CSS_SELECTOR, "#timeline .b-privacy").text)
    go(d, args, "/health", "#health-status")
    text = d.find_element(By.TAG_NAME, "main").text
    check("item 5: health speaks plain units", "uptime_s" not in text and not re.search(r"\d{5,} bytes", text), text[:300])
    go(d, args, "/settings", "#settings-form input")
    labels = texts(d, "#settings-form .setting > .label")
    check("item 5: settings are named in words", labels and all("." not in l for l in labels), labels)
    go(d, args, "/consolidation", "#runs a").click()
    wait(d, "#rollback-dry")
    raw = [p for p in d.find_elements(By.CSS_SELECTOR, "main pre") if p.is_displayed()]
    check("item 5: a consolidation report is in words, the JSON on demand", not raw and "Kept from chat" in d.find_element(By.TAG_NAME, "main").text)
    d.find_element(By.ID, "rollback-dry").click()
    wait(d, "#rollback-result h2")
    check("a run's report previews its rollback", "dry run" in d.find_element(By.ID, "rollback-result").text.lower())
    orders = []
    for _ in range(2):
        go(d, args, "/search", 'input[name="scene"]')
        orders.append([i.get_attribute("value") for i in d.find_elements(By.CSS_SELECTOR, 'input[name="scene"]')])
    check("item 5: scene checkboxes keep one order", orders[0] == orders[1] and len(orders[0]) >= 6, orders)


def item6_tokens(d, args):
    go(d, args, "/tokens", "#tokens article")
    me = d.find_elements(By.CSS_SELECTOR, '#tokens article.me[data-name="root"] #token-me')
    check("item 6: the token signed in with is marked", me)
    names = [c.get_attribute("data-name") for c in d.find_elements(By.CSS_SELECTOR, "#tokens article")]
    check("tokens lists every token", {"root", "group", "spare", "temp"} <= set(names), names)
    d.find_element(By.CSS_SELECTOR, 'button.revoke[data-name="spare"]').click()
    wait(d, "#revoke-spare-confirm").click()
    wait_for(d, lambda: not d.find_elements(By.CSS_SELECTOR, 'button.revoke[data-name="spare"]'), "the revoked token")
    check("item 6: revoking another token refreshes the list", d.find_elements(By.CSS_SELECTOR, '#tokens article[data-name="spare"] .b-status-bad'))
    sign_in(d, args, args.temp_token)
    go(d, args, "/tokens", '#tokens article.me[data-name="temp"]')
    d.find_element(By.CSS_SELECTOR, 'button.revoke[data-name="temp"]').click()
    wait(d, "#revoke-temp-confirm").click()
    wait(d, "#signin p.error")
    check("item 6: revoking your own token signs you out with a reason",
          "revoked" in d.find_element(By.CSS_SELECTOR, "#signin p.error").text and not d.find_elements(By.ID, "nav-search"))
    errors = [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE" and "401" not in e["message"]]
    check("item 6: no uncaught errors", not errors, errors)
    sign_in(d, args, args.admin_token)


def item7_access(d, args, rtl):
    go(d, args, "/memory/" + rtl, "#m-text")
    check("item 7: right-to-left overrides are shown, not obeyed", "[U+202E]" in d.find_element(By.ID, "m-text").text)
    go(d, args, "/search?q=%E8%A5%BF%E6%B9%96", "#results .text")
    langs = [e.get_attribute("lang") for e in d.find_elements(By.CSS_SELECTOR, "#results .text") if "西湖" in e.text]
    check("item 7: Chinese text is marked lang=zh", langs and all(l == "zh" for l in langs), langs)
    go(d, args, "/timeline", "#timeline article")
    title = d.title
    active = d.execute_script("return document.activeElement.tagName + ':' + document.activeElement.textContent")
    check("item 7: navigation sets the title and moves focus to the heading", title.startswith("Timeline") and active.startswith("H1:"), (title, active))
    go(d, args, "/memory/" + args.keep_id, "#m-tags button.x")
    x = d.find_element(By.CSS_SELECTOR, "#m-tags button.x")
    size = x.size
    check("item 7: tag remove buttons are named and big enough",
          (x.get_attribute("aria-label") or "").startswith("Remove tag") and size["width"] >= 24 and size["height"] >= 24, (x.get_attribute("aria-label"), size))
    unnamed = d.execute_script(
        "return [...document.querySelectorAll('input, select, textarea')].filter(e => e.type !== 'hidden' && !e.labels.length"
        " && !e.getAttribute('aria-label')).map(e => e.id || e.name)")
    check("item 7: every control on the memory page has a name", not unnamed, unnamed)


def item8_expected(d, args):
    go(d, args, "/memory/" + args.keep_id, "#m-text")
    d.find_element(By.TAG_NAME, "body").send_keys("/")
    wait_for(d, lambda: d.execute_script("return document.activeElement && document.activeElement.id") == "q", "/ to focus search")
    check("item 8: / jumps to search", True)
    go(d, args, "/timeline", "#tl-stage")
    Select(d.find_element(By.ID, "tl-stage")).select_by_value("short")
    wait_for(d, lambda: "stage=short" in frag(d) and d.find_elements(By.CSS_SELECTOR, "#timeline article"), "the chat filter")
    stages = {a.find_elements(By.CSS_SELECTOR, ".b-stage") != [] for a in d.find_elements(By.CSS_SELECTOR, "#timeline article")}
    check("item 8: the timeline filters by stage", stages == {True}, stages)
    month = time.strftime("%Y-%m", time.gmtime())
    go(d, args, f"/timeline?month={month}", "#timeline")
    wait_for(d, lambda: d.find_elements(By.CSS_SELECTOR, "#timeline section.month, #timeline p"), "the month")
    check("item 8: the timeline jumps to a month",
          {s.get_attribute("data-month") for s in d.find_elements(By.CSS_SELECTOR, "#timeline section.month")} == {month})
    go(d, args, "/consolidation", "#run-dry").click()
    wait(d, "#run-result h2")
    check("item 8: consolidation has a dry run button", "Dry run" in d.find_element(By.ID, "run-result").text)
    go(d, args, "/categories", "#category-new-form")
    d.find_element(By.ID, "category-name").send_keys("house-rules")
    d.find_element(By.ID, "category-content").send_keys("# House rules\n\n- Be kind")
    d.find_element(By.ID, "category-create").click()
    wait_for(d, lambda: "#/categories/house-rules" in d.current_url and d.find_elements(By.ID, "category-text"), "the new category")
    check("item 8: a category can be created", "Be kind" in d.find_element(By.ID, "category-text").text)
    mid = write_memory(d, args, "季度预算评审定在周五", title="预算评审", kind="event", when="2026-05-08")
    wait(d, "#m-details").click()
    facts = d.find_element(By.ID, "m-details").text
    check("item 8: the write form sets kind, title and when it happened",
          "event" in facts and "2026-05-08" in facts and "预算评审" in d.find_element(By.TAG_NAME, "h1").text, facts)
    return mid


def owner_flow(args):
    d = browser(args, 390, 844)
    try:
        d.get(args.url + "/")
        wait(d, "#token")
        sign_in(d, args, args.admin_token)
        check("item 6: sign in shows the token's name", d.find_element(By.ID, "token-name").text == "root")
        keep = write_memory(d, args, "周末和小明去西湖划船，记得带相机", "旅行, 西湖")
        drop = write_memory(d, args, "旧的电话号码备注：请在下周前删除")
        xss = write_memory(d, args, 'XSS probe <img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> end')
        text = wait(d, "#m-text")
        check("XSS memory shows its markup as text", "<img src=x" in text.text and "<script>" in text.text, text.text)
        check("XSS memory runs nothing", d.execute_script("return window.__pwned === undefined")
              and not d.find_elements(By.CSS_SELECTOR, "#m-text img, #m-text script"))
        ids = search(d, args, "西湖")
        check("Chinese search finds the memory", keep in ids, ids)
        item1_search(d, args)
        newer = item2_versions(d, args, keep)
        args.keep_id = newer
        item2_forget(d, args, drop)
        ids = search(d, args, "西湖")
        check("search shows the new version", newer in ids, ids)
        check("search hides the superseded version", keep not in ids, ids)
        check("search hides the forgotten memory", drop not in search(d, args, "电话号码"))
        go(d, args, "/timeline", "#timeline article")
        old = d.find_elements(By.CSS_SELECTOR, f'#timeline article[data-id="{keep}"]')
        check("timeline marks the superseded version", old and "superseded" in old[0].get_attribute("class"))
        item3_documents(d, args)
        item4_chat(d, args, args.group_memory)
        buttons = d.find_elements(By.CSS_SELECTOR, "#inbox button.keep")
        if buttons:
            buttons[0].click()
            wait(d, "#inbox a.mlink[href*='memory']")
            d.refresh()
            wait(d, "#inbox")
            check("kept memory leaves the inbox", not d.find_elements(By.CSS_SELECTOR, "#inbox button.keep"))
        item5_words(d, args)
        item7_access(d, args, args.rtl_memory)
        item8_expected(d, args)
        item6_tokens(d, args)
        csp = [e["message"] for e in d.get_log("browser") if "Content Security Policy" in e["message"]]
        check("no CSP violations", not csp, csp)
        return newer
    finally:
        d.quit()


# (name, hash, what marks the page as loaded)
def pages(newer, doc):
    return [
        ("search", "/search?q=%E8%A5%BF%E6%B9%96", "#results article"),
        ("latest", "/search", "#results article"),
        ("write", "/write", "#w-text"),
        ("memory", "/memory/" + newer, "#history li"),
        ("timeline", "/timeline", "#timeline article"),
        ("inbox", "/inbox", "#inbox"),
        ("documents", "/documents", "#documents article"),
        ("document", "/document/" + doc, "#m-text table"),
        ("categories", "/categories", "#categories article"),
        ("forgotten", "/forgotten", "#forgotten article"),
        ("consolidation", "/consolidation", "#runs article"),
        ("health", "/health", "svg.chart"),
        ("settings", "/settings", "#settings-form input"),
        ("tokens", "/tokens", "#tokens article"),
    ]


def tour(args, newer):
    """Every page at both sizes in both themes: a screenshot and an axe-core run each."""
    for (width, height, size) in ((1280, 800, "desktop"), (390, 844, "phone")):
        for dark in (False, True):
            theme = "dark" if dark else "light"
            d = browser(args, width, height, dark)
            try:
                d.get(args.url + "/")
                wait(d, "#token")
                shot(d, args, f"signin-{size}-{theme}")
                axe(d, args, f"signin-{size}-{theme}")
                sign_in(d, args, args.admin_token)
                if dark and size == "phone":
                    bg = d.execute_script("return getComputedStyle(document.body).backgroundColor")
                    check("dark mode darkens the page", bg == "rgb(20, 22, 26)", bg)
                for name, hash_, css in pages(newer, args.doc_id):
                    go(d, args, hash_, css)
                    shot(d, args, f"{name}-{size}-{theme}")
                    axe(d, args, f"{name}-{size}-{theme}")
            finally:
                d.quit()
    check("item 7: axe-core finds no serious or critical violation on any page", not axe_problems, axe_problems[:10])


def group_flow(args):
    d = browser(args, 390, 844)
    try:
        sign_in(d, args, args.group_token)
        nav = texts(d, "#nav a")
        check("a group token has no admin pages", "Tokens" not in nav and "Settings" not in nav, nav)
        check("item 5: a group token sees no Consolidation link", "Consolidation" not in nav, nav)
        hits = search(d, args, "西湖")
        scenes = {b.get_attribute("data-value") for b in d.find_elements(By.CSS_SELECTOR, "#results .b-scene")}
        check("a group token finds its scene's memory", len(hits) >= 1, len(hits))
        check("a group token sees only its scene", scenes == {args.group_scene}, scenes)
        shot(d, args, "group-search-phone-light")
        go(d, args, "/write", "#w-privacy")
        privacy = [o.get_attribute("value") for o in d.find_elements(By.CSS_SELECTOR, "#w-privacy option")]
        tiers = [o.get_attribute("value") for o in d.find_elements(By.CSS_SELECTOR, "#w-tier option")]
        check("item 5: write offers no secret or pinned to a token that cannot use them",
              "secret" not in privacy and "t0" not in tiers, (privacy, tiers))
        go(d, args, "/timeline", "#timeline .b-scene")
        scenes = {b.get_attribute("data-value") for b in d.find_elements(By.CSS_SELECTOR, "#timeline .b-scene")}
        check("a group token's timeline has only its scene", scenes == {args.group_scene}, scenes)
        go(d, args, "/documents", "#documents")
        wait_for(d, lambda: d.find_elements(By.CSS_SELECTOR, "#documents article, #documents p"), "the group's documents")
        check("a group token lists no owner document", "西湖 guide" not in d.find_element(By.ID, "documents").text)
        d.execute_script("sessionStorage.clear()")
        d.get(args.url + "/#/tokens")
        wait(d, "#token")
        check("without a token the console asks to sign in", True)
    finally:
        d.quit()


def main():
    p = argparse.ArgumentParser()
    for a in ("--url", "--admin-token", "--group-token", "--temp-token", "--group-scene", "--group-memory",
              "--rtl-memory", "--doc-id", "--shots", "--chromedriver", "--axe"):
        p.add_argument(a, required=True)
    p.add_argument("--chromium", default="/usr/bin/chromium")
    args = p.parse_args()
    with open(args.axe, encoding="utf-8") as f:
        args.axe_source = f.read()
    started = time.monotonic()
    try:
        newer = owner_flow(args)
        group_flow(args)
        tour(args, newer)
        check("no horizontal overflow at 390 px", not overflowing, overflowing)
    except Exception as e:  # a step that could not run is a failure, with its reason
        failures.append("run")
        print(f"FAIL run: {type(e).__name__}: {e}", flush=True)
    print(json.dumps({"failures": failures, "seconds": round(time.monotonic() - started, 1)}), flush=True)
    sys.exit(min(len(failures), 100))


if __name__ == "__main__":
    main()
