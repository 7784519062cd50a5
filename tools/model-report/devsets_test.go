package main

import (
	"errors"
	"testing"
)

func TestDevSetMetrics(t *testing.T) {
	rep, err := parseEval([]byte(`{"model":"m","n":3,"routing":{"tool_recall_at":{},"server_step_recall_at_5":0.75,"server_top1":0.5,"server_queries":4}}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := routingMetrics(mMSCStep5, mMSCTop1)(rep)
	if err != nil {
		t.Fatal(err)
	}
	if m[mMSCStep5] != 0.75 || m[mMSCTop1] != 0.5 || len(m) != 2 {
		t.Errorf("got %v, want step 0.75 and top-1 0.5", m)
	}
	for _, tc := range []struct {
		name, json string
	}{
		{"no routing", `{"model":"m"}`},
		{"no server queries", `{"routing":{"server_step_recall_at_5":0}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := parseEval([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := routingMetrics(mMCPFull5, mMCPTop1)(rep); !errors.Is(err, ErrReport) {
				t.Errorf("got %v, want ErrReport", err)
			}
		})
	}
	rep, err = parseEval([]byte(`{"categories":{"accuracy":0.9,"ece_after":0.02}}`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := hwuMetrics(rep)
	if err != nil || h[mHWUAcc] != 0.9 || h[mHWUECE] != 0.02 {
		t.Errorf("got %v, %v; want accuracy 0.9, ECE 0.02", h, err)
	}
}
