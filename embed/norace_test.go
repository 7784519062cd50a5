//go:build !race

package embed

// raceEnabled is true under the race detector, which slows the tokenizer
// about tenfold; long table walks then check a sample.
const raceEnabled = false
