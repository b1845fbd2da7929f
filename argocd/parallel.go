package argocd

import "sync"

// workers bounds the requests a command about many Applications sends
// at once: eight keep a thousand Applications quick without flooding the
// API servers.
const workers = 8

// Parallel runs do(0..n-1), at most workers at a time.
func Parallel(n int, do func(int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < min(n, workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				do(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// Brief is err cut to fit a line of a report.
func Brief(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
