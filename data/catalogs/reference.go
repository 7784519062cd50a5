// Package catalogs holds the out-of-the-box catalog. Its example prompts
// also serve gen-index as the reference set from which a model's confidence
// maps are learnt for catalogs too sparse to fit their own (see
// classify.ReferencePrior).
package catalogs

import _ "embed"

// Default is data/catalogs/default.json, compiled in.
//
//go:embed default.json
var Default []byte
