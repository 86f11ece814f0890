// The eval mode: `promql eval` reads one JSON document on stdin,
//
//	{"series": [{"metric": "name{label=\"value\"}", "values": [1, 2, null, ...]}],
//	 "expr": "...", "minutes": 60}
//
// where each series has one sample a minute from t=0 (null: no sample that minute), runs `expr`
// as a range query with Prometheus's own engine at every minute from 0 to `minutes`, and prints
// the result as JSON: [{"metric": {...}, "minutes": [0, 1, ...]}], the minutes at which each
// result series had a value. The alert-rule tests (tests/deploy/test_alert_rules.py) build the
// `for:` clause on top of it. No TSDB: the samples live in memory for the one query.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

type evalInput struct {
	Series []struct {
		Metric string     `json:"metric"`
		Values []*float64 `json:"values"`
	} `json:"series"`
	Expr    string `json:"expr"`
	Minutes int    `json:"minutes"`
}

type evalSeries struct {
	Metric  map[string]string `json:"metric"`
	Minutes []int64           `json:"minutes"`
	Values  []float64         `json:"values"`
}

// floatSample is one float sample, the only kind the rule tests load.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }

// seriesList is a SeriesSet over series already in memory.
type seriesList struct {
	items []storage.Series
	i     int
}

func (l *seriesList) Next() bool                        { l.i++; return l.i <= len(l.items) }
func (l *seriesList) At() storage.Series                { return l.items[l.i-1] }
func (l *seriesList) Err() error                        { return nil }
func (l *seriesList) Warnings() annotations.Annotations { return nil }

func runEval(in io.Reader) error {
	var input evalInput
	if err := json.NewDecoder(in).Decode(&input); err != nil {
		return fmt.Errorf("input: %w", err)
	}
	var all []storage.Series
	for _, s := range input.Series {
		lset, err := parser.NewParser(parser.Options{}).ParseMetric(s.Metric)
		if err != nil {
			return fmt.Errorf("series %q: %w", s.Metric, err)
		}
		var samples []chunks.Sample
		for i, v := range s.Values {
			if v != nil {
				samples = append(samples, floatSample{int64(i) * time.Minute.Milliseconds(), *v})
			}
		}
		all = append(all, storage.NewListSeries(lset, samples))
	}
	selectFn := func(sorted bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
		var out []storage.Series
		for _, s := range all {
			if matchesAll(s.Labels(), ms) {
				out = append(out, s)
			}
		}
		if sorted {
			slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
		}
		return &seriesList{items: out}
	}
	queryable := &storage.MockQueryable{MockQuerier: &storage.MockQuerier{SelectMockFunction: selectFn}}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1 << 24, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	end := time.Unix(0, 0).Add(time.Duration(input.Minutes) * time.Minute)
	query, err := engine.NewRangeQuery(context.Background(), queryable, nil, input.Expr, time.Unix(0, 0), end, time.Minute)
	if err != nil {
		return fmt.Errorf("expr: %w", err)
	}
	result := query.Exec(context.Background())
	if result.Err != nil {
		return fmt.Errorf("eval: %w", result.Err)
	}
	matrix, err := result.Matrix()
	if err != nil {
		return fmt.Errorf("result: %w", err)
	}
	out := []evalSeries{}
	for _, s := range matrix {
		row := evalSeries{Metric: s.Metric.Map()}
		for _, p := range s.Floats {
			row.Minutes = append(row.Minutes, p.T/time.Minute.Milliseconds())
			row.Values = append(row.Values, p.F)
		}
		out = append(out, row)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func matchesAll(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}
