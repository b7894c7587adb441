// Command flightd serves TileDB arrays and Blosc2 NDArray files over Apache
// Arrow Flight, and inspects arrays on disk (flightd inspect PATH).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "inspect" {
		os.Exit(runInspect(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(runServe(os.Args[1:], os.Stderr))
}

func runServe(args []string, stderr *os.File) int {
	fmt.Fprintln(stderr, "flightd: the Flight service is not built yet; `flightd inspect PATH` works")
	return 2
}
