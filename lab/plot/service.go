package plot

import (
	"cmp"
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/cordon-rag/cordon/lab/bench"
)

// Service draws throughput against clients (log scale) for the store path
// (cordon) and the service path (http) of reports written by 'cordon-lab bench
// --systems cordon,http --json': one colour per system, one line style per
// tenant count. Every report is a point; the line goes through the median
// of the reports at each client count. It writes the chart to file.
func Service(reports []*bench.Report, file string) error {
	type key struct {
		system  string
		tenants int
	}
	runs := map[key]map[int][]float64{} // clients -> qps of each report
	var keys []key
	for _, r := range reports {
		for _, name := range []string{bench.SystemCordon, bench.SystemHTTP} {
			s := r.Systems[name]
			if s == nil || s.QPS <= 0 {
				continue
			}
			k := key{name, r.Tenants}
			if runs[k] == nil {
				runs[k] = map[int][]float64{}
				keys = append(keys, k)
			}
			runs[k][r.Concurrency] = append(runs[k][r.Concurrency], s.QPS)
		}
	}
	if !slices.ContainsFunc(keys, func(k key) bool { return k.system == bench.SystemHTTP }) {
		return fmt.Errorf("plot: no report has the http system (cordon-lab bench --systems cordon,http)")
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.tenants, b.tenants), cmp.Compare(a.system, b.system))
	})
	var counts []int
	for _, k := range keys {
		if !slices.Contains(counts, k.tenants) {
			counts = append(counts, k.tenants)
		}
	}
	slices.Sort(counts)
	p := plot.New()
	p.Title.Text = "Cordon bench: store path (cordon) and service path (http)"
	p.X.Label.Text = "concurrent clients"
	p.Y.Label.Text = "queries per second"
	p.X.Scale = plot.LogScale{}
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	for _, k := range keys {
		var medians, all plotter.XYs
		clients := make([]int, 0, len(runs[k]))
		for c := range runs[k] {
			clients = append(clients, c)
		}
		slices.Sort(clients)
		for _, c := range clients {
			qps := slices.Clone(runs[k][c])
			slices.Sort(qps)
			m := qps[len(qps)/2]
			if len(qps)%2 == 0 {
				m = (qps[len(qps)/2-1] + qps[len(qps)/2]) / 2
			}
			medians = append(medians, plotter.XY{X: float64(c), Y: m})
			for _, q := range qps {
				all = append(all, plotter.XY{X: float64(c), Y: q})
			}
		}
		line, err := plotter.NewLine(medians)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		pts, err := plotter.NewScatter(all)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		sys := slices.Index(bench.AllSystems, k.system)
		line.Color, pts.Color, pts.Shape = plotutil.Color(sys), plotutil.Color(sys), plotutil.Shape(sys)
		line.Dashes = plotutil.Dashes(slices.Index(counts, k.tenants))
		p.Add(line, pts)
		p.Legend.Add(fmt.Sprintf("%s, %d tenant(s)", k.system, k.tenants), line, pts)
	}
	var ticks []plot.Tick // at the client counts measured
	for _, k := range keys {
		for c := range runs[k] {
			if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == float64(c) }) {
				ticks = append(ticks, plot.Tick{Value: float64(c), Label: fmt.Sprint(c)})
			}
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = p.X.Min/1.5, p.X.Max*1.5
	p.Y.Max *= 1.25 // room for the legend
	if err := p.Save(9*vg.Inch, 6*vg.Inch, file); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}
