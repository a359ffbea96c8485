package posenc_test

import (
	"fmt"

	"github.com/rpe-go/rpe/posenc"
)

// tree+rope: the tree bias serves the pairwise tree relations, RoPE the
// token order (each part gets the site with positions of a kind it serves:
// RoPE sees the line of the span). The combined encoding has exactly the
// costly attention hooks of its parts: a score bias and a q/k transform,
// no score or value terms.
func ExampleNewCombined() {
	tree, err := posenc.NewTreeRel(posenc.DefaultTreeMaxUp, posenc.DefaultTreeMaxDown, 0.02, false)
	if err != nil {
		panic(err)
	}
	rope, err := posenc.New("rope", posenc.Options{})
	if err != nil {
		panic(err)
	}
	enc, err := posenc.NewCombined(tree, rope)
	if err != nil {
		panic(err)
	}
	c, _ := posenc.AsCombined(enc)
	fmt.Println(enc.Name())
	fmt.Println(c.Describe())
	fmt.Println(posenc.Accepted(enc))
	_, bias := enc.(posenc.ScoreBiaser)
	_, qk := enc.(posenc.QKTransformer)
	_, terms := enc.(posenc.ScoreTermer)
	_, values := enc.(posenc.ValueTermer)
	fmt.Println(bias, qk, terms, values)

	// the same encoding twice would share its parameters: an error
	deberta, _ := posenc.New("deberta", posenc.Options{})
	deberta2, _ := posenc.New("deberta", posenc.Options{})
	_, err = posenc.NewCombined(deberta, deberta2)
	fmt.Println(err)
	// Output:
	// tree+rope
	// tree+rope: tree (pairwise; score bias), rope (line or real; q/k transform)
	// [pairwise line real]
	// true true false false
	// posenc: combined encoding deberta+deberta: deberta appears twice (the parts would share parameters)
}
