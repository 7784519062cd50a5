package embed_test

import (
	"context"
	"fmt"
	"os"

	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/models"
)

func ExampleEngine_Embed() {
	lib := os.Getenv("ORT_LIB")
	if lib == "" {
		lib = "../.cache/onnxruntime-1.24.3/libonnxruntime.so.1"
	}
	dir := os.Getenv("USE_LITE_DIR")
	if dir == "" {
		dir = "../../shared/models/use-lite-en"
	}
	data, err := os.ReadFile("../models/use-lite-en.json")
	if err != nil {
		panic(err)
	}
	man, err := models.ParseManifest(data)
	if err != nil {
		panic(err)
	}
	rt, err := embed.InitRuntime(lib)
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	eng, err := embed.Open(rt, embed.Config{ModelDir: dir, Manifest: man})
	if err != nil {
		panic(err)
	}
	defer eng.Close()

	v, err := eng.Embed(context.Background(), []string{
		"Check my GitHub notifications",
		"any unread alerts on github?",
		"bake a chocolate cake",
	})
	if err != nil {
		panic(err)
	}
	dot := func(a, b []float32) (s float32) {
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	fmt.Println("dims:", eng.Dims())
	fmt.Println("paraphrase closer than unrelated:", dot(v[0], v[1]) > dot(v[0], v[2]))
	// Output:
	// dims: 512
	// paraphrase closer than unrelated: true
}
