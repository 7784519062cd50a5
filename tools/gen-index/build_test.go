package main

import (
	"testing"
	"time"
)

func TestSourceDateEpoch(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Time
		wantNil bool
		wantErr bool
	}{
		{in: "", wantNil: true},
		{in: "1700000000", want: time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC)},
		{in: "0", want: time.Unix(0, 0).UTC()},
		{in: "-5", wantErr: true},
		{in: "yesterday", wantErr: true},
		{in: "1.5", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			now, err := sourceDateEpoch(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("sourceDateEpoch(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if (now == nil) != tc.wantNil {
				t.Fatalf("sourceDateEpoch(%q) nil %v, want nil %v", tc.in, now == nil, tc.wantNil)
			}
			if now != nil {
				if got := now(); !got.Equal(tc.want) || got.Location() != time.UTC {
					t.Errorf("sourceDateEpoch(%q)() = %v, want %v UTC", tc.in, got, tc.want)
				}
			}
		})
	}
}
