module github.com/cordon-rag/cordon

go 1.26.0

require golang.org/x/crypto v0.59.0

require golang.org/x/sys v0.50.0 // indirect
