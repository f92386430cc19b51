package admin_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/idemgen/idemgen/runtime"
)

// The support page in a real browser: headless Chromium (Debian's chromium package) driven over
// the DevTools protocol. scripts/test.sh installs Chromium when it is missing and sets
// IDEMGEN_REQUIRE_BROWSER=1, so CI cannot pass by skipping this test.
//
//	scripts/with-postgres.sh go test ./runtime/admin -run Browser -v
//
// IDEMGEN_UPDATE_SCREENSHOT=1 rewrites docs/admin-page.png from the run.

const (
	envChromium       = "IDEMGEN_CHROMIUM"        // the browser binary; default chromium on PATH
	envRequireBrowser = "IDEMGEN_REQUIRE_BROWSER" // 1: a missing browser fails the test
	envUpdateShot     = "IDEMGEN_UPDATE_SCREENSHOT"
)

// chromiumPath finds the browser, or skips (fails under IDEMGEN_REQUIRE_BROWSER=1).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv(envChromium), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (set " + envChromium + ", or apt-get install chromium): run the tests with `make test`"
	if os.Getenv(envRequireBrowser) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a context driving one tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1100, 1400),
	}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 90*time.Second)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// Cleanups run last-in first-out: the browser stops before its profile folder is removed.
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancelTimeout()
	})
	start := time.Now()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	t.Logf("Chromium started in %v", time.Since(start).Round(time.Millisecond))
	return bctx
}

// TestBrowserSupportPage loads the page, searches a tenant and a key as support staff would,
// and checks what is shown: the completed payment's state, stored status, Location and log
// digests; the body only after the toggle, as text (the stored <script> and <img onerror> never
// run); then a per-operation key held running, with its lease; then a key never used.
func TestBrowserSupportPage(t *testing.T) {
	ctx := browser(t)
	s := newService(t)
	s.fill(t)
	_, keyHash := runtime.LogDigests(tenant, payKey)
	start := time.Now()

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("%s: %v\npage: %s", what, err, html)
		}
	}
	// submit clicks a button that posts a form and waits for the page it loads, then for sel on
	// that page.
	submit := func(what, button, sel string) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		_, err := chromedp.Run(sctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(button))))
		if err == nil {
			err = chromedp.Do(sctx, chromedp.WaitVisible(chromedp.CSS(sel)))
		}
		if err != nil {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("%s: %v\npage: %s", what, err, html)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(v)
	}
	eval := func(expr string) int {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	title := func() string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Title())
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	do("type the payment's tenant and key",
		chromedp.Navigate(s.srv.URL+"/admin/"),
		chromedp.WaitVisible(chromedp.ID("search")),
		chromedp.SendKeys(chromedp.ID("tenant"), tenant),
		chromedp.SendKeys(chromedp.ID("key"), payKey),
	)
	submit("search the payment's key", "#find", "#record-0")
	if got := title(); got != "Idempotency records" {
		t.Errorf("title %q", got)
	}
	if state := text("#record-0 .state"); !strings.HasPrefix(state, "completed") {
		t.Errorf("state %q", state)
	}
	if status := text("#record-0 .status"); status != "201" {
		t.Errorf("stored status %q", status)
	}
	if loc := text("#record-0 .location"); !strings.HasPrefix(loc, "/v1/payments/42") {
		t.Errorf("location %q", loc)
	}
	if logs := text("#record-0 .logs"); !strings.Contains(logs, "key_hash="+keyHash) {
		t.Errorf("log digests %q", logs)
	}
	if n, note := eval(`document.querySelectorAll('pre.body').length`), text("#record-0 .show-body"); n != 0 || !strings.Contains(note, "hidden") {
		t.Errorf("the body is shown before it was asked for (%d, %q)", n, note)
	}

	submit("show the body", "#record-0 .show-body-button", "#record-0 pre.body")
	body := text("#record-0 pre.body")
	note, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#record-0 table.headers tr')].filter(r => r.cells[0] && r.cells[0].textContent === 'X-Note').map(r => r.cells[1].textContent).join('')`))
	if err != nil {
		t.Fatal(err)
	}
	if body != hostile || note != hostile {
		t.Errorf("the stored body and header are not shown as text:\nbody   %q\nheader %q", body, note)
	}
	// Nothing from the stored response became an element, and no script ran.
	if n, got := eval(`document.querySelectorAll('script, img, iframe, object, embed').length`), title(); n != 0 || got != "Idempotency records" {
		t.Errorf("stored markup became elements (%d) or ran (title %q)", n, got)
	}
	shot := screenshot(t, ctx)

	do("choose the capture's per-operation key",
		chromedp.SetValue(chromedp.ID("key"), capKey),
		chromedp.SetValue(chromedp.ID("operation"), "captureCharge"),
	)
	submit("search the capture's key", "#find", `#record-0[data-state="running"]`)
	if state, lease := text("#record-0 .state"), text("#record-0 .lease"); !strings.HasPrefix(state, "running") ||
		!strings.HasPrefix(lease, "running until") || !strings.Contains(lease, "409") {
		t.Errorf("running capture: state %q, lease %q", state, lease)
	}

	do("type a key never used",
		chromedp.SetValue(chromedp.ID("key"), "never-used-key-000000001"),
		chromedp.SetValue(chromedp.ID("operation"), ""),
	)
	submit("search a key never used", "#find", "#none")
	if none := text("#none"); !strings.Contains(none, "No record for this key in tenant "+tenant) {
		t.Errorf("unknown key: %q", none)
	}
	t.Logf("page checks took %v; screenshot %d bytes", time.Since(start).Round(time.Millisecond), len(shot))
}

// screenshot takes a PNG of the whole page; IDEMGEN_UPDATE_SCREENSHOT=1 keeps it as
// docs/admin-page.png.
func screenshot(t *testing.T, ctx context.Context) []byte {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(png) < 1000 || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("screenshot: %d bytes, not a PNG", len(png))
	}
	if os.Getenv(envUpdateShot) == "1" {
		out := filepath.Join("..", "..", "docs", "admin-page.png")
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", out)
	}
	return png
}
