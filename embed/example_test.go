package embed_test

import (
	"context"
	"fmt"
	"os"

	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/models"
)

func ExampleEngine_Embed() {
	// In a program these come from flags; the tests find them with testenv.
	lib, dir := testenv.ORTLib(), testenv.UseLiteDir()
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
