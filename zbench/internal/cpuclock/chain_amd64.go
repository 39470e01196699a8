package cpuclock

const haveChain = true

// addChain runs n iterations of chainAdds dependent register additions.
//
//go:noescape
func addChain(n int)
