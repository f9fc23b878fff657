package plot

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/cordon-rag/cordon/lab/bench"
)

// Bench draws p50 latency (log scale) against corpus size (log scale), one
// line per system and tenant count, from reports, and writes it to file
// (the format follows the extension, e.g. .png). A point is the one-client
// p50 where the report has one (cordon-lab bench --serial), else the p50 with
// the report's clients.
func Bench(reports []*bench.Report, file string) error {
	if len(reports) == 0 {
		return fmt.Errorf("plot: no reports")
	}
	multiTenant := false
	for _, r := range reports {
		if r.Tenants != reports[0].Tenants {
			multiTenant = true
		}
	}
	type key struct {
		system  string
		tenants int
	}
	// One point per system, tenant count and corpus size: the one-client
	// p50 (--serial) where a report measured it, else the p50 with the
	// report's clients; of two reports for the same point, a serial one wins.
	type point struct {
		y      float64
		serial bool
	}
	points := map[key]map[int]point{}
	var keys []key
	for _, r := range reports {
		for _, name := range bench.AllSystems {
			s := r.Systems[name]
			if s == nil || s.P50 <= 0 {
				continue
			}
			k := key{name, r.Tenants}
			if !multiTenant {
				k.tenants = 0
			}
			if _, ok := points[k]; !ok {
				keys = append(keys, k)
				points[k] = map[int]point{}
			}
			pt := point{y: s.P50}
			if s.SerialP50 != nil && *s.SerialP50 > 0 {
				pt = point{y: *s.SerialP50, serial: true}
			}
			if old, ok := points[k][r.Chunks]; !ok || (pt.serial && !old.serial) {
				points[k][r.Chunks] = pt
			}
		}
	}
	series := map[key]plotter.XYs{}
	for k, byChunks := range points {
		for chunks, pt := range byChunks {
			series[k] = append(series[k], plotter.XY{X: float64(chunks), Y: pt.y})
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(slices.Index(bench.AllSystems, a.system), slices.Index(bench.AllSystems, b.system)); c != 0 {
			return c
		}
		return cmp.Compare(a.tenants, b.tenants)
	})
	p := plot.New()
	p.Title.Text = "Cordon bench: p50 query latency vs corpus size"
	p.X.Label.Text = "chunks (all tenants)"
	p.Y.Label.Text = "p50 latency (ms): one client where measured, else 8"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = -vg.Points(4)
	p.Legend.YOffs = vg.Points(4)
	p.Add(plotter.NewGrid())
	var counts []int // distinct tenant counts, ascending: one line style each
	for _, k := range keys {
		if !slices.Contains(counts, k.tenants) {
			counts = append(counts, k.tenants)
		}
	}
	slices.Sort(counts)
	minX, maxX := math.Inf(1), math.Inf(-1)
	for _, k := range keys {
		xys := series[k]
		slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		for _, xy := range xys {
			minX, maxX = min(minX, xy.X), max(maxX, xy.X)
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		sys := slices.Index(bench.AllSystems, k.system)
		line.Color = plotutil.Color(sys)
		points.Color = plotutil.Color(sys)
		points.Shape = plotutil.Shape(sys)
		label := k.system
		if multiTenant {
			// One line style per tenant count, one colour per system.
			line.Dashes = plotutil.Dashes(slices.Index(counts, k.tenants))
			label = fmt.Sprintf("%s, %d tenant(s)", k.system, k.tenants)
		}
		p.Add(line, points)
		p.Legend.Add(label, line, points)
	}
	// Room either side of the points, so a single corpus size still plots.
	p.X.Min, p.X.Max = minX/2, maxX*2
	if err := p.Save(9*vg.Inch, 6*vg.Inch, file); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}
