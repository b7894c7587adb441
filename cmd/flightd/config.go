package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// A setting comes from, in order of precedence: the command line, the
// environment (TILEFLIGHT_<NAME>), the -config file (TOML, keys are the
// flag names), the flag's default. The file is named by -config or
// TILEFLIGHT_CONFIG. deploy/flightd.toml lists every key.

// configOnly are flags that make no sense inside a config file.
var configOnly = map[string]bool{"config": true, "print-config": true, "version": true}

// secretFlags hold credentials: -print-config masks their values.
var secretFlags = map[string]bool{"encryption-key": true, "tokens": true}

// registerConfigFlags adds -config and -print-config to fs.
func registerConfigFlags(fs *flag.FlagSet, c *serveConfig) {
	fs.StringVar(&c.configFile, "config", "", "TOML `file` of settings, keys named as the flags (data = \"/srv/arrays\"); flags and TILEFLIGHT_* variables override it")
	fs.BoolVar(&c.printConfig, "print-config", false, "print the settings in effect as TOML (secrets masked), then exit")
}

// envName is the environment variable that sets flag name.
func envName(name string) string {
	return "TILEFLIGHT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applySettings fills every flag not given on the command line from the
// environment, then from the config file (named by -config, which may
// itself come from TILEFLIGHT_CONFIG).
func applySettings(fs *flag.FlagSet, getenv func(string) string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := envName(f.Name)
		if v := getenv(env); v != "" {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %v", env, v, e)
			}
			set[f.Name] = true
		}
	})
	if err != nil {
		return err
	}
	cf := fs.Lookup("config")
	if cf == nil || cf.Value.String() == "" {
		return nil
	}
	return applyConfigFile(fs, cf.Value.String(), set)
}

// applyConfigFile sets the flags named in the TOML file path, except those
// in skip (already set by a flag or the environment). An unknown key is an
// error: a misspelt setting silently ignored is worse than a refusal.
func applyConfigFile(fs *flag.FlagSet, path string, skip map[string]bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-config: %w", err)
	}
	var doc map[string]any
	md, err := toml.Decode(string(b), &doc)
	if err != nil {
		return fmt.Errorf("-config %s: %w", path, err)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := fs.Lookup(k)
		if f == nil || configOnly[k] {
			return fmt.Errorf("-config %s: unknown key %q (keys are flag names; flightd -help lists them)", path, k)
		}
		if skip[k] {
			continue
		}
		s, err := tomlScalar(doc[k])
		if err != nil {
			return fmt.Errorf("-config %s: %s: %v", path, k, err)
		}
		if err := f.Value.Set(s); err != nil {
			return fmt.Errorf("-config %s: %s = %s: %v", path, k, s, err)
		}
	}
	_ = md
	return nil
}

// tomlScalar turns a TOML value into the text its flag parses.
func tomlScalar(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case []any:
		// A list of strings joins with commas, as -tokens and -peers take.
		parts := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return "", errors.New("a list may hold only strings")
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("a %T is not a setting (want a string, number, boolean or list of strings)", v)
}

// printConfig writes every setting in effect as TOML that -config reads
// back, secrets masked.
func printConfig(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "# flightd settings in effect (flag > TILEFLIGHT_* > -config file > default)")
	fs.VisitAll(func(f *flag.Flag) {
		if configOnly[f.Name] {
			return
		}
		v := f.Value.String()
		if secretFlags[f.Name] && v != "" {
			fmt.Fprintf(w, "%s = %q # masked\n", f.Name, "********")
			return
		}
		fmt.Fprintf(w, "%s = %s\n", f.Name, tomlLiteral(f.Value))
	})
}

// tomlLiteral is v as a TOML value: booleans and plain numbers bare,
// everything else (durations, sizes with units, text) quoted.
func tomlLiteral(v flag.Value) string {
	s := v.String()
	if bf, ok := v.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
		return s
	}
	if g, ok := v.(flag.Getter); ok {
		switch g.Get().(type) {
		case int, int64, uint, uint64, float64:
			return s
		}
	}
	return strconv.Quote(s)
}
