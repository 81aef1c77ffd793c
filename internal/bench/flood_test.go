package bench

import (
	"context"
	"testing"
)

// TestPreviewFloodLoop: with PreviewFlood every repeat also runs the
// pipeline beside the micro service under a flood of preview requests;
// every task still gets exactly one outcome (Run checks it), every preview
// is answered, and the report has the ratio.
func TestPreviewFloodLoop(t *testing.T) {
	rep, err := Run(context.Background(), Options{Tasks: 300, Concurrency: 8, PreviewFlood: 1000, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	l := rep.Loop(LoopFlood)
	if l == nil || l.Median.Flood == nil {
		t.Fatalf("no %s loop with flood stats in %+v", LoopFlood, rep.Loops)
	}
	f := l.Median.Flood
	if f.Sent == 0 || f.Answered != f.Sent || f.Lost != 0 {
		t.Errorf("flood %s: want every request sent answered", f)
	}
	if rep.Flood == nil || len(rep.Flood.Each) != 1 || rep.Flood.Floor != FloorFlood {
		t.Errorf("ratio %+v: want one repeat against the floor %v", rep.Flood, FloorFlood)
	}
	if rep.Loop(LoopPipeline) == nil {
		t.Error("no pipeline loop to compare with")
	}
}
