package plot

import (
	"fmt"
	"github.com/cordon-rag/cordon/lab/eval"
	"image/color"
	"io"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// pipelineColors are colour-blind-safe (Okabe-Ito) and fixed per pipeline, so
// every panel reads the same way.
var pipelineColors = map[eval.Pipeline]color.Color{
	eval.BM25Only:     color.RGBA{0x00, 0x72, 0xb2, 0xff}, // blue
	eval.DenseOnly:    color.RGBA{0xe6, 0x9f, 0x00, 0xff}, // orange
	eval.HybridRRF:    color.RGBA{0x00, 0x9e, 0x73, 0xff}, // green
	eval.HybridRerank: color.RGBA{0xcc, 0x79, 0xa7, 0xff}, // purple
}

// metricNames label the metric panel's groups, in [eval.Metrics] field order.
var metricNames = []string{"R@1", "R@5", "R@10", "MRR@10", "nDCG@10"}

func metricValues(m eval.Metrics) []float64 {
	return []float64{m.RecallAt1, m.RecallAt5, m.RecallAt10, m.MRRAt10, m.NDCGAt10}
}

// Eval draws runs as a PNG bar chart: for each run, one panel with the
// four pipelines' metrics and, when the run has a bake-off, one panel with
// each chunking's recall@10 per pipeline. Panels stack top to bottom.
func Eval(w io.Writer, runs []eval.Evaluation) error {
	var panels []*plot.Plot
	for _, r := range runs {
		p, err := metricPanel(r)
		if err != nil {
			return err
		}
		panels = append(panels, p)
		if len(r.BakeOff) > 0 {
			p, err := bakeOffPanel(r)
			if err != nil {
				return err
			}
			panels = append(panels, p)
		}
	}
	if len(panels) == 0 {
		return fmt.Errorf("plot: no runs to draw")
	}
	const width, rowHeight = 9 * vg.Inch, 3.4 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, rowHeight*vg.Length(len(panels))), vgimg.UseDPI(110),
		vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align(rows, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[i][0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

func runTitle(r eval.Evaluation) string {
	rep := r.Report
	t := fmt.Sprintf("%s: %d docs, %d queries; %s", r.Meta.Corpus, rep.Documents, rep.Queries, rep.Setup())
	if len(rep.DropSections) == 0 {
		t += "; no section held out"
	}
	return t
}

// groupedBars adds one bar series per pipeline to p, values[pipeline][group].
func groupedBars(p *plot.Plot, values map[eval.Pipeline][]float64, barWidth vg.Length) error {
	for i, pl := range plotPipelines {
		bars, err := plotter.NewBarChart(plotter.Values(values[pl]), barWidth)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		bars.Color = pipelineColors[pl]
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-float64(len(plotPipelines)-1)/2) * barWidth
		p.Add(bars)
		p.Legend.Add(pl.Label(), bars)
	}
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Y.Min, p.Y.Max = 0, 1.3 // headroom for the legend
	p.Y.Tick.Marker = plot.ConstantTicks(unitTicks())
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil // group positions need no vertical lines
	p.Add(grid)
	return nil
}

func unitTicks() []plot.Tick {
	var t []plot.Tick
	for i := 0; i <= 10; i++ {
		v := float64(i) / 10
		label := ""
		if i%2 == 0 {
			label = fmt.Sprintf("%.1f", v)
		}
		t = append(t, plot.Tick{Value: v, Label: label})
	}
	return t
}

func metricPanel(r eval.Evaluation) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = runTitle(r)
	p.Title.TextStyle.Font.Size = vg.Points(10)
	values := make(map[eval.Pipeline][]float64)
	for _, pl := range plotPipelines {
		values[pl] = metricValues(r.Report.Result(pl).Metrics)
	}
	if err := groupedBars(p, values, vg.Points(22)); err != nil {
		return nil, err
	}
	p.NominalX(metricNames...)
	p.X.Min, p.X.Max = -0.5, float64(len(metricNames))-0.5
	return p, nil
}

func bakeOffPanel(r eval.Evaluation) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "chunking bake-off, recall@10 (fixed = windows ignoring headings; structure = section-aware; size/overlap in words)"
	if d := r.Report.DropSections; len(d) > 0 {
		p.Title.Text += "; held out: " + strings.Join(d, ", ")
	}
	p.Title.TextStyle.Font.Size = vg.Points(10)
	values := make(map[eval.Pipeline][]float64)
	names := make([]string, len(r.BakeOff))
	for i, v := range r.BakeOff {
		names[i] = strings.Replace(v.Variant.Name, " ", "\n", 1)
		for _, pl := range plotPipelines {
			values[pl] = append(values[pl], v.Report.Result(pl).RecallAt10)
		}
	}
	if err := groupedBars(p, values, vg.Points(11)); err != nil {
		return nil, err
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	return p, nil
}

// plotPipelines are the pipelines a chart draws: the service profile's four
// (the seed and other profiles are in the tables).
var plotPipelines = []eval.Pipeline{eval.BM25Only, eval.DenseOnly, eval.HybridRRF, eval.HybridRerank}
