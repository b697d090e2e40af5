module convograph/adapters/manglekit

go 1.19
