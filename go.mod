module github.com/zbench/zbench

go 1.26.0

require (
	github.com/stretchr/testify v1.12.1
	github.com/x448/float16 v0.8.4
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da // indirect
	golang.org/x/sys v0.49.0 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
	gonum.org/v1/netlib v0.0.0-20190313105609-8cb42192e0e0 // indirect
)
