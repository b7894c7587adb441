package main

import (
	"fmt"
	"io"
)

func runInspect(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "flightd inspect: not built yet")
	return 2
}
