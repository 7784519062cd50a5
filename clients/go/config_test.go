package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, name := range []string{EnvEnableSmartRouting, EnvMaxTools, EnvMaxServers} {
		t.Setenv(name, env[name]) // unset ones become empty, which means unset
	}
}

func TestConfigFromEnv(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		opts []Option
		want Config
	}{
		{"defaults", nil, nil, Config{MaxTools: 30, MaxServers: 4}},
		{"disabled", map[string]string{EnvEnableSmartRouting: "false"}, nil, Config{Disabled: true, MaxTools: 30, MaxServers: 4}},
		{"zero disables", map[string]string{EnvEnableSmartRouting: "0"}, nil, Config{Disabled: true, MaxTools: 30, MaxServers: 4}},
		{"enabled any case", map[string]string{EnvEnableSmartRouting: " TRUE "}, nil, Config{MaxTools: 30, MaxServers: 4}},
		{"thresholds", map[string]string{EnvMaxTools: "50", EnvMaxServers: "2"}, nil, Config{MaxTools: 50, MaxServers: 2}},
		{"options override", map[string]string{EnvEnableSmartRouting: "off", EnvMaxTools: "50"},
			[]Option{WithSmartRouting(true), WithMaxTools(10), WithMaxServers(1)}, Config{MaxTools: 10, MaxServers: 1}},
		{"option turns off", nil, []Option{WithSmartRouting(false)}, Config{Disabled: true, MaxTools: 30, MaxServers: 4}},
		{"with config", nil, []Option{WithConfig(func(c *Config) { c.Timeout = time.Second })}, Config{MaxTools: 30, MaxServers: 4, Timeout: time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			got, err := ConfigFromEnv(tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got.Disabled != tc.want.Disabled || got.MaxTools != tc.want.MaxTools || got.MaxServers != tc.want.MaxServers || got.Timeout != tc.want.Timeout {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestConfigFromEnvRejects(t *testing.T) {
	cases := []struct {
		name     string
		env      map[string]string
		opts     []Option
		wantName string
	}{
		{"not a boolean", map[string]string{EnvEnableSmartRouting: "maybe"}, nil, EnvEnableSmartRouting},
		{"not a number", map[string]string{EnvMaxTools: "many"}, nil, EnvMaxTools},
		{"zero tools", map[string]string{EnvMaxTools: "0"}, nil, EnvMaxTools},
		{"negative servers", map[string]string{EnvMaxServers: "-1"}, nil, EnvMaxServers},
		{"fraction", map[string]string{EnvMaxServers: "2.5"}, nil, EnvMaxServers},
		{"bad option", nil, []Option{WithMaxTools(0)}, "max tools 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			_, err := ConfigFromEnv(tc.opts...)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tc.wantName) {
				t.Fatalf("err = %q, want it to name %q", err, tc.wantName)
			}
		})
	}
}

func TestDisabledMakesNoCall(t *testing.T) {
	f := &fakeServer{answer: githubAnswer()}
	setEnv(t, map[string]string{EnvEnableSmartRouting: "false"})
	cfg, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	r := New(startFake(t, f), cfg)
	tools := agentTools(6, 6)
	res, err := r.FilterTools(context.Background(), "c", conversation, tools)
	if err != nil {
		t.Fatal(err)
	}
	if res.Routed || len(res.Tools) != len(tools) || f.calls != 0 {
		t.Fatalf("routed=%v tools=%d calls=%d, want no routing, all %d tools, no call", res.Routed, len(res.Tools), f.calls, len(tools))
	}
	// The environment's thresholds reach FilterTools: 36 tools on 6 servers is below 40.
	setEnv(t, map[string]string{EnvMaxTools: "40"})
	cfg, _ = ConfigFromEnv()
	if res, _ := New(startFake(t, f), cfg).FilterTools(context.Background(), "c", conversation, tools); res.Routed || f.calls != 0 {
		t.Fatalf("routed with 36 tools and SMART_ROUTING_MAX_TOOLS=40")
	}
	setEnv(t, nil)
	cfg, _ = ConfigFromEnv()
	if res, _ := New(startFake(t, f), cfg).FilterTools(context.Background(), "c", conversation, tools); !res.Routed || f.calls != 1 {
		t.Fatalf("routed=%v calls=%d with the defaults, want routed once", res.Routed, f.calls)
	}
}
