package main

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "flightd.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigPrecedence: flag > TILEFLIGHT_* > -config file > default, per
// setting, for each kind of value (string, size, duration, bool, int).
func TestConfigPrecedence(t *testing.T) {
	file := writeConfig(t, `
data = "/file/data"
memory-budget = "256MiB"
shutdown-timeout = "5s"
demo = true
workers = 3
log-format = "json"
`)
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(c *serveConfig) bool
	}{
		{"default", nil, nil, func(c *serveConfig) bool {
			return c.data == "./data" && c.workers == 0 && !c.demo && c.shutdownTimeout == 30*time.Second && c.logFormat == "console"
		}},
		{"file over default", []string{"-config", file}, nil, func(c *serveConfig) bool {
			return c.data == "/file/data" && c.memoryBudget == 256<<20 && c.shutdownTimeout == 5*time.Second && c.demo && c.workers == 3 && c.logFormat == "json"
		}},
		{"file named by the environment", nil, map[string]string{"TILEFLIGHT_CONFIG": file}, func(c *serveConfig) bool {
			return c.data == "/file/data" && c.workers == 3
		}},
		{"environment over file", []string{"-config", file}, map[string]string{"TILEFLIGHT_DATA": "/env/data", "TILEFLIGHT_WORKERS": "5", "TILEFLIGHT_DEMO": "false"}, func(c *serveConfig) bool {
			return c.data == "/env/data" && c.workers == 5 && !c.demo && c.memoryBudget == 256<<20
		}},
		{"flag over environment and file", []string{"-config", file, "-data", "/flag/data", "-memory-budget", "1GiB", "-demo=false"},
			map[string]string{"TILEFLIGHT_DATA": "/env/data", "TILEFLIGHT_MEMORY_BUDGET": "64MiB"}, func(c *serveConfig) bool {
				return c.data == "/flag/data" && c.memoryBudget == 1<<30 && !c.demo && c.workers == 3 && c.shutdownTimeout == 5*time.Second
			}},
		{"flag over environment, no file", []string{"-workers", "7"}, map[string]string{"TILEFLIGHT_WORKERS": "5", "TILEFLIGHT_LISTEN": "127.0.0.1:9"}, func(c *serveConfig) bool {
			return c.workers == 7 && c.listen == "127.0.0.1:9"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseServeFlags(tc.args, &bytes.Buffer{}, func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Fatalf("%+v", c)
			}
		})
	}
}

func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`dta = "/x"`, `unknown key "dta"`},
		{`config = "other.toml"`, `unknown key "config"`},
		{`memory-budget = "lots"`, "memory-budget"},
		{`data = [1, 2]`, "list may hold only strings"},
		{`data = `, "flightd.toml"},
		{"[s3]\nendpoint = \"x\"", `unknown key "s3"`},
	} {
		_, err := parseServeFlags([]string{"-config", writeConfig(t, tc.text)}, &bytes.Buffer{}, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to mention %q", tc.text, err, tc.want)
		}
	}
	if _, err := parseServeFlags([]string{"-config", "/nonexistent/flightd.toml"}, &bytes.Buffer{}, func(string) string { return "" }); err == nil {
		t.Error("a missing config file accepted")
	}
	c, err := parseServeFlags([]string{"-config", writeConfig(t, `tokens = ["a rw", "b ro"]`)}, &bytes.Buffer{}, func(string) string { return "" })
	if err != nil || c.tokens != "a rw,b ro" {
		t.Fatalf("token list: %q %v", c.tokens, err)
	}
}

// TestPrintConfig: -print-config masks secrets, and its output is a config
// file that reads back to the same settings.
func TestPrintConfig(t *testing.T) {
	env := map[string]string{"TILEFLIGHT_TOKENS": "sekrit rw", "TILEFLIGHT_ENCRYPTION_KEY": "0123456789abcdeF0123456789abcdeF"}
	getenv := func(k string) string { return env[k] }
	var out bytes.Buffer
	pc, err := parseServeFlags([]string{"-print-config", "-workers", "4", "-memory-budget", "300MiB", "-demo"}, &bytes.Buffer{}, getenv)
	if err != nil || !pc.printConfig {
		t.Fatalf("%+v %v", pc, err)
	}
	printConfig(&out, pc.flags)
	text := out.String()
	for _, secret := range []string{"sekrit", "0123456789abcdeF"} {
		if strings.Contains(text, secret) {
			t.Fatalf("secret %q printed:\n%s", secret, text)
		}
	}
	for _, want := range []string{"workers = 4\n", "memory-budget = \"300MiB\"\n", "demo = true\n", "tokens = \"********\" # masked\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	// Read back without the secrets (masked values are not the settings).
	var kept []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.Contains(l, "# masked") {
			kept = append(kept, l)
		}
	}
	c, err := parseServeFlags([]string{"-config", writeConfig(t, strings.Join(kept, "\n"))}, &bytes.Buffer{}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.workers != 4 || c.memoryBudget != 300<<20 || !c.demo {
		t.Fatalf("read back: %+v", c)
	}
}

// TestDeployConfigListsEveryFlag: deploy/flightd.toml names every flag
// (set, or commented out with its default), and with every commented
// setting switched on it still loads.
func TestDeployConfigListsEveryFlag(t *testing.T) {
	b, err := os.ReadFile("../../deploy/flightd.toml")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^(# )?([a-z0-9-]+) = (.*)$`)
	listed := map[string]bool{}
	var all []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			if listed[m[2]] {
				t.Errorf("%s listed twice", m[2])
			}
			listed[m[2]] = true
			all = append(all, m[2]+" = "+m[3])
		}
	}
	c, err := parseServeFlags(nil, &bytes.Buffer{}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	c.flags.VisitAll(func(f *flag.Flag) {
		if !configOnly[f.Name] && !listed[f.Name] {
			t.Errorf("deploy/flightd.toml does not list %s", f.Name)
		}
	})
	if _, err := parseServeFlags([]string{"-config", "../../deploy/flightd.toml"}, &bytes.Buffer{}, func(string) string { return "" }); err != nil {
		t.Fatalf("as shipped: %v", err)
	}
	// Every line on: the commented defaults parse too (the key file and
	// the key are exclusive, and the tls pair must name files: left out).
	var on []string
	for _, l := range all {
		switch strings.SplitN(l, " ", 2)[0] {
		case "encryption-key-file", "tls-cert", "tls-key", "peers", "tokens-file":
			continue
		}
		on = append(on, l)
	}
	if _, err := parseServeFlags([]string{"-config", writeConfig(t, strings.Join(on, "\n"))}, &bytes.Buffer{}, func(string) string { return "" }); err != nil {
		t.Fatalf("every setting on: %v", err)
	}
}

// TestDeployServiceUnit: the systemd unit runs flightd on the shipped
// config, hardened; systemd-analyze verifies it where installed.
func TestDeployServiceUnit(t *testing.T) {
	b, err := os.ReadFile("../../deploy/flightd.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"ExecStart=/usr/local/bin/flightd -config /etc/tileflight/flightd.toml\n",
		"DynamicUser=yes\n", "StateDirectory=tileflight\n", "ProtectSystem=strict\n", "NoNewPrivileges=yes\n",
		"ProtectHome=yes\n", "PrivateTmp=yes\n", "CapabilityBoundingSet=\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("deploy/flightd.service lacks %q", strings.TrimSpace(want))
		}
	}
	// The config's data directory is the unit's state directory.
	if c, err := parseServeFlags([]string{"-config", "../../deploy/flightd.toml"}, &bytes.Buffer{}, func(string) string { return "" }); err != nil || c.data != "/var/lib/tileflight" {
		t.Fatalf("deploy/flightd.toml data: %v %v", c, err)
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: unit not verified by systemd")
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "flightd.service")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(unit, "/usr/local/bin/flightd", exe)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", p).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
