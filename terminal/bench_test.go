package terminal

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func logWithPrompt(lines int) []byte {
	var b bytes.Buffer
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&b, "2026-01-01T10:00:%02d INFO step %d: processed 128 records in 3ms\n", i%60, i)
	}
	b.WriteString("Do you want to continue? [Y/n] ")
	return b.Bytes()
}

// BenchmarkDetect10kLineLog is detection on a 10,000-line session log: read
// the tail from disk, clean it, classify the last line. The embedder is the
// fake: this measures terminal's own work; embed's benchmarks measure the
// model's.
func BenchmarkDetect10kLineLog(b *testing.B) {
	d := fakeDetector(b)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.log"), logWithPrompt(10000), 0o644); err != nil {
		b.Fatal(err)
	}
	logs := Logs{Dir: dir}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tail, err := logs.ReadTail("s")
		if err != nil {
			b.Fatal(err)
		}
		r, err := d.Detect(ctx, tail.Data, 0.7)
		if err != nil || !r.Detected {
			b.Fatalf("%v %v", r, err)
		}
	}
}

// BenchmarkDetectBySize shows the cost does not grow with the log: a 1 GiB
// (sparse) log costs what a 1 MiB one does.
func BenchmarkDetectBySize(b *testing.B) {
	d := fakeDetector(b)
	ctx := context.Background()
	tailData := logWithPrompt(200)
	for _, size := range []int64{1 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("log=%dMiB", size>>20), func(b *testing.B) {
			dir := b.TempDir()
			f, err := os.Create(filepath.Join(dir, "s.log"))
			if err != nil {
				b.Fatal(err)
			}
			if err := f.Truncate(size - int64(len(tailData))); err != nil {
				b.Fatal(err)
			}
			if _, err := f.WriteAt(tailData, size-int64(len(tailData))); err != nil {
				b.Fatal(err)
			}
			f.Close()
			logs := Logs{Dir: dir}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tail, err := logs.ReadTail("s")
				if err != nil {
					b.Fatal(err)
				}
				if r, err := d.Detect(ctx, tail.Data, 0.7); err != nil || !r.Detected {
					b.Fatalf("%v %v", r, err)
				}
			}
		})
	}
}

// BenchmarkDetectPaintedScreen is the worst case of the screen model: a
// 64 KiB tail (the most DetectInputPrompt takes) of a curses program
// repainting its screen with cursor moves since one clear, played whole.
func BenchmarkDetectPaintedScreen(b *testing.B) {
	d := fakeDetector(b)
	var raw bytes.Buffer
	raw.WriteString("\x1b[?1049h\x1b[H\x1b[2J")
	for raw.Len() < TailBytes-200 {
		fmt.Fprintf(&raw, "\x1b[%d;%dH%s", raw.Len()%40+1, raw.Len()%80+1, "│ item of the menu │")
	}
	raw.WriteString("\x1b[40;1HModified buffers exist; exit anyway? (yes or no) ")
	data := raw.Bytes()[:min(raw.Len(), TailBytes)]
	ctx := context.Background()
	h := Hints{CommandLine: "editor notes.txt"}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		r, err := d.DetectWithHints(ctx, data, h, 0.7)
		if err != nil || !r.Detected {
			b.Fatalf("%v %v", r, err)
		}
	}
}
