// Command promql checks PromQL expressions with Prometheus's own parser, offline: one JSON string
// per input line (an expression), one error line per expression that does not parse. Exit status
// 1 when any fails. hack/chart.py feeds it the chart's alert rules and dashboard queries.
// `promql eval` evaluates one expression over given series instead (eval.go).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "eval" {
		if err := runEval(os.Stdin); err != nil {
			fmt.Fprintf(os.Stderr, "promql eval: %v\n", err)
			os.Exit(1)
		}
		return
	}
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	promql := parser.NewParser(parser.Options{})
	bad, n := 0, 0
	for scanner.Scan() {
		var expr string
		if err := json.Unmarshal(scanner.Bytes(), &expr); err != nil {
			fmt.Printf("input line %d: not a JSON string: %v\n", n+1, err)
			os.Exit(2)
		}
		n++
		if _, err := promql.ParseExpr(expr); err != nil {
			bad++
			fmt.Printf("%s\n  -> %v\n", expr, err)
		}
	}
	fmt.Printf("promql: %d expressions, %d invalid\n", n, bad)
	if bad > 0 {
		os.Exit(1)
	}
}
