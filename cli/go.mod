module github.com/gatehouse-id/gatehouse/cli

go 1.26.10

require (
	connectrpc.com/connect v1.21.1
	github.com/gatehouse-id/gatehouse/pkg v0.0.0
	github.com/lestrrat-go/jwx/v3 v3.4.0
	github.com/mattn/go-isatty v0.0.24
	github.com/spf13/cobra v1.10.2
	google.golang.org/protobuf v1.36.12
	sigs.k8s.io/yaml v1.6.0
)

require golang.org/x/oauth2 v0.37.0 // indirect

require (
	buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go v1.36.12-20260825204119-511051f7f437.1 // indirect
	github.com/decred/dcrd/dcrec/secp256k1/v4 v4.4.1 // indirect
	github.com/gatehouse-id/gatehouse/services/directory v0.0.0
	github.com/goccy/go-json v0.11.2 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/lestrrat-go/blackmagic v1.0.4 // indirect
	github.com/lestrrat-go/dsig v1.4.0 // indirect
	github.com/lestrrat-go/dsig-secp256k1 v1.0.0 // indirect
	github.com/lestrrat-go/httpcc v1.0.1 // indirect
	github.com/lestrrat-go/httprc/v3 v3.0.6 // indirect
	github.com/lestrrat-go/option/v2 v2.0.0 // indirect
	github.com/segmentio/asm v1.2.1 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	github.com/valyala/fastjson v1.6.10 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261005182115-fad411399dd8 // indirect
)

replace github.com/gatehouse-id/gatehouse/pkg => ../pkg

replace github.com/gatehouse-id/gatehouse/services/directory => ../services/directory

replace github.com/gatehouse-id/gatehouse/services/tokens => ../services/tokens
