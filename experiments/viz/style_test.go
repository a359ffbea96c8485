package viz

import (
	"fmt"
	"testing"
)

// TestSeriesStyle checks that no two of 40 series look alike (colour, dash
// pattern and marker together) and that the first 20 differ in colour
// alone, as do neighbours in dash pattern and marker.
func TestSeriesStyle(t *testing.T) {
	styles := map[string]int{}
	colours := map[string]int{}
	for i := 0; i < 40; i++ {
		s := SeriesStyle(i)
		r, g, b, a := s.Color.RGBA()
		col := fmt.Sprint(r, g, b, a)
		key := fmt.Sprintf("%s|%v|%T", col, s.Dashes, s.Shape)
		if j, ok := styles[key]; ok {
			t.Errorf("series %d and %d have the same style %s", j, i, key)
		}
		styles[key] = i
		if i < 20 {
			if j, ok := colours[col]; ok {
				t.Errorf("series %d and %d have the same colour", j, i)
			}
			colours[col] = i
		}
		if i > 0 {
			p := SeriesStyle(i - 1)
			if fmt.Sprint(p.Dashes) == fmt.Sprint(s.Dashes) || fmt.Sprintf("%T", p.Shape) == fmt.Sprintf("%T", s.Shape) {
				t.Errorf("series %d and %d share a dash pattern or a marker", i-1, i)
			}
		}
	}
	if fmt.Sprint(SeriesStyle(-1)) != fmt.Sprint(SeriesStyle(39)) {
		t.Error("SeriesStyle(-1) is not SeriesStyle(39)")
	}
}
