package client

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The environment variables ConfigFromEnv reads. The Python
// (classifierd.RoutingConfig.from_env) and Node.js (configFromEnv) clients
// read the same ones, so an agent is configured the same way in any language.
const (
	// EnvEnableSmartRouting turns routing on or off: true (default) or
	// false; 1/0, yes/no and on/off also work, in any case.
	EnvEnableSmartRouting = "ENABLE_SMART_ROUTING"
	// EnvMaxTools: route only when the agent has more tools than this (default 30).
	EnvMaxTools = "SMART_ROUTING_MAX_TOOLS"
	// EnvMaxServers: ... and more servers than this (default 4).
	EnvMaxServers = "SMART_ROUTING_MAX_SERVERS"
)

// ErrConfig reports an invalid environment variable or option; the error
// names the variable.
var ErrConfig = errors.New("client: invalid configuration")

// Option overrides a setting after ConfigFromEnv has read the environment.
type Option func(*Config)

// WithSmartRouting turns routing on or off, whatever ENABLE_SMART_ROUTING says.
func WithSmartRouting(enabled bool) Option {
	return func(c *Config) { c.Disabled = !enabled }
}

// WithMaxTools sets the tool threshold, whatever SMART_ROUTING_MAX_TOOLS says.
func WithMaxTools(n int) Option {
	return func(c *Config) { c.MaxTools = n }
}

// WithMaxServers sets the server threshold, whatever SMART_ROUTING_MAX_SERVERS says.
func WithMaxServers(n int) Option {
	return func(c *Config) { c.MaxServers = n }
}

// WithConfig applies any other change to the Config (Timeout, OnEvent...).
func WithConfig(f func(*Config)) Option {
	return Option(f)
}

// ConfigFromEnv returns the Config agents use today: routing on unless
// ENABLE_SMART_ROUTING is false, and only above SMART_ROUTING_MAX_TOOLS
// tools (default 30) and SMART_ROUTING_MAX_SERVERS servers (default 4).
// An unset or empty variable takes its default; opts override the
// environment. A value that is not a boolean, or a threshold that is not a
// positive integer (from the environment or an option), is an error
// wrapping ErrConfig.
func ConfigFromEnv(opts ...Option) (Config, error) {
	cfg := Config{MaxTools: 30, MaxServers: 4}
	var errs []error
	if v, ok := lookup(EnvEnableSmartRouting); ok {
		enabled, err := parseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: want true or false", ErrConfig, EnvEnableSmartRouting, v))
		}
		cfg.Disabled = !enabled
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{EnvMaxTools, &cfg.MaxTools}, {EnvMaxServers, &cfg.MaxServers}} {
		v, ok := lookup(f.name)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%w: %s=%q: want a positive integer", ErrConfig, f.name, v))
			continue
		}
		*f.dst = n
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.MaxTools < 1 || cfg.MaxServers < 1 {
		errs = append(errs, fmt.Errorf("%w: max tools %d, max servers %d: want positive integers", ErrConfig, cfg.MaxTools, cfg.MaxServers))
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// lookup returns a variable's trimmed value, and whether it is set and not blank.
func lookup(name string) (string, bool) {
	v := strings.TrimSpace(os.Getenv(name))
	return v, v != ""
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, errors.New("not a boolean")
}
