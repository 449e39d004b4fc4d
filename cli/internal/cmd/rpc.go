package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-id/gatehouse/cli/internal/output"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1/adminv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
)

type (
	mc = managementv1connect.ManagementServiceClient
	ac = adminv1connect.AdminServiceClient
)

// invoker calls one RPC with a request of its type.
type invoker func(ctx context.Context, req proto.Message) (proto.Message, error)

// method is an RPC the CLI can call: how to make its request and how to
// call it once signed in.
type method struct {
	newReq func() proto.Message
	bind   func(*clients) invoker
}

func unary[Req, Res any](f func(context.Context, *Req) (*Res, error)) invoker {
	return func(ctx context.Context, m proto.Message) (proto.Message, error) {
		res, err := f(ctx, any(m).(*Req))
		if err != nil {
			return nil, err
		}
		return any(res).(proto.Message), nil
	}
}

// mgmt is a ManagementService method, named by its method expression.
func mgmt[Req, Res any, PReq interface {
	*Req
	proto.Message
}](f func(mc, context.Context, *Req) (*Res, error)) method {
	return method{
		newReq: func() proto.Message { return PReq(new(Req)) },
		bind: func(c *clients) invoker {
			return unary(func(ctx context.Context, r *Req) (*Res, error) {
				return f(c.mgmt, ctx, r)
			})
		},
	}
}

// admin is an AdminService method.
func admin[Req, Res any, PReq interface {
	*Req
	proto.Message
}](f func(ac, context.Context, *Req) (*Res, error)) method {
	return method{
		newReq: func() proto.Message { return PReq(new(Req)) },
		bind: func(c *clients) invoker {
			return unary(func(ctx context.Context, r *Req) (*Res, error) {
				return f(c.admin, ctx, r)
			})
		},
	}
}

// rpcCmd describes a command that is one RPC: positional arguments and
// flags fill request fields (by their proto paths), -f FILE the rest.
type rpcCmd struct {
	use, short, long, example string
	rpc                       method
	// args are the request fields of the positional arguments, in order.
	args []string
	// flags are request fields offered as flags: "path" (the flag is the
	// last element in kebab-case) or "flag-name=path".
	flags []string
	// required flags (by flag name).
	required []string
	// fromFile offers -f FILE: the request (or its base) as JSON or YAML.
	fromFile bool
	view     output.View
	// after handles the response instead of printing it (e.g. writes a
	// key file); nil prints it.
	after func(a *App, c *cobra.Command, res proto.Message) error
	// before completes the request (e.g. resolves names) before the call.
	before func(ctx context.Context, a *App, c *cobra.Command, cl *clients, req proto.Message) error
}

type flagBinding struct {
	name string
	path []protoreflect.Name
	fd   protoreflect.FieldDescriptor
}

// cmdOption adjusts a built command (extra flags).
type cmdOption func(*cobra.Command)

func (a *App) rpcCommand(s rpcCmd, opts ...cmdOption) *cobra.Command {
	c := &cobra.Command{
		Use:     s.use,
		Short:   s.short,
		Long:    s.long,
		Example: s.example,
		Args:    cobra.ExactArgs(len(s.args)),
	}
	md := s.rpc.newReq().ProtoReflect().Descriptor()
	a.rpcs = append(a.rpcs, md.FullName())
	var bindings []flagBinding
	for _, spec := range s.flags {
		name, p, ok := strings.Cut(spec, "=")
		if !ok {
			p = name
			parts := strings.Split(p, ".")
			name = strings.ReplaceAll(parts[len(parts)-1], "_", "-")
		}
		b := flagBinding{name: name, path: toNames(p)}
		b.fd = fieldAt(md, b.path)
		if b.fd == nil {
			panic(fmt.Sprintf("cli: %s has no field %s", md.FullName(), p))
		}
		defineFlag(c, b)
		bindings = append(bindings, b)
	}
	for _, r := range s.required {
		_ = c.MarkFlagRequired(r)
	}
	var file string
	if s.fromFile {
		c.Flags().StringVarP(&file, "file", "f", "", "the request as a JSON or YAML file (the management API's field names); flags override it")
	}
	for _, o := range opts {
		o(c)
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		req := s.rpc.newReq()
		if file != "" {
			if err := readRequest(file, req); err != nil {
				return err
			}
		}
		m := req.ProtoReflect()
		for i, p := range s.args {
			path := toNames(p)
			fd := fieldAt(md, path)
			if fd.Kind() == protoreflect.BytesKind {
				// A positional value is the value itself, not a file.
				parent(m, path).Set(fd, protoreflect.ValueOfBytes([]byte(args[i])))
				continue
			}
			if err := setValue(m, path, fd, args[i]); err != nil {
				return fmt.Errorf("argument %d: %w", i+1, err)
			}
		}
		for _, b := range bindings {
			if !c.Flags().Changed(b.name) {
				continue
			}
			if err := applyFlag(c, m, b); err != nil {
				return fmt.Errorf("--%s: %w", b.name, err)
			}
		}
		ctx := c.Context()
		cl, err := a.clients(ctx)
		if err != nil {
			return err
		}
		if s.before != nil {
			if err := s.before(ctx, a, c, cl, req); err != nil {
				return err
			}
		}
		res, err := s.rpc.bind(cl)(ctx, req)
		if err != nil {
			return err
		}
		if s.after != nil {
			return s.after(a, c, res)
		}
		return a.print(res, s.view)
	}
	return c
}

func toNames(p string) []protoreflect.Name {
	var out []protoreflect.Name
	for _, s := range strings.Split(p, ".") {
		out = append(out, protoreflect.Name(s))
	}
	return out
}

func fieldAt(md protoreflect.MessageDescriptor, path []protoreflect.Name) protoreflect.FieldDescriptor {
	var fd protoreflect.FieldDescriptor
	for i, n := range path {
		fd = md.Fields().ByName(n)
		if fd == nil {
			return nil
		}
		if i < len(path)-1 {
			if fd.Message() == nil {
				return nil
			}
			md = fd.Message()
		}
	}
	return fd
}

func isDuration(fd protoreflect.FieldDescriptor) bool {
	return fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Duration"
}

func defineFlag(c *cobra.Command, b flagBinding) {
	fd := b.fd
	usage := fieldUsage(fd)
	switch {
	case fd.IsList() && fd.Kind() == protoreflect.EnumKind:
		c.Flags().StringSlice(b.name, nil, usage)
	case fd.IsList():
		c.Flags().StringArray(b.name, nil, usage+" (repeat the flag for several)")
	case fd.Kind() == protoreflect.BoolKind:
		c.Flags().Bool(b.name, false, usage)
	case fd.Kind() == protoreflect.BytesKind:
		c.Flags().String(b.name, "", usage+" (a file name; - for stdin)")
	default:
		c.Flags().String(b.name, "", usage)
	}
}

func fieldUsage(fd protoreflect.FieldDescriptor) string {
	u := string(fd.Name())
	if fd.Kind() == protoreflect.EnumKind {
		u += ": " + fieldUsageEnum(fd.Enum())
	}
	if isDuration(fd) {
		u += " (a duration, e.g. 12h)"
	}
	return u
}

// enumPrefix is the shared prefix of an enum's value names
// (OIDC_APP_TYPE_ of OIDC_APP_TYPE_WEB), which flags may leave out.
func enumPrefix(ed protoreflect.EnumDescriptor) string {
	vals := ed.Values()
	if vals.Len() == 0 {
		return ""
	}
	p := string(vals.Get(0).Name())
	for i := 1; i < vals.Len(); i++ {
		n := string(vals.Get(i).Name())
		for !strings.HasPrefix(n, p) {
			p = p[:len(p)-1]
		}
	}
	if i := strings.LastIndex(p, "_"); i >= 0 {
		return p[:i+1]
	}
	return ""
}

func parseEnum(ed protoreflect.EnumDescriptor, s string) (protoreflect.EnumNumber, error) {
	up := strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
	if v := ed.Values().ByName(protoreflect.Name(up)); v != nil {
		return v.Number(), nil
	}
	if v := ed.Values().ByName(protoreflect.Name(enumPrefix(ed) + up)); v != nil {
		return v.Number(), nil
	}
	return 0, fmt.Errorf("unknown value %q (%s)", s, fieldUsageEnum(ed))
}

func fieldUsageEnum(ed protoreflect.EnumDescriptor) string {
	var names []string
	prefix := enumPrefix(ed)
	for i := 0; i < ed.Values().Len(); i++ {
		if v := ed.Values().Get(i); !strings.HasSuffix(string(v.Name()), "_UNSPECIFIED") {
			names = append(names, strings.TrimPrefix(string(v.Name()), prefix))
		}
	}
	return strings.Join(names, ", ")
}

// parent returns the message holding the last field of path, creating
// the messages on the way.
func parent(m protoreflect.Message, path []protoreflect.Name) protoreflect.Message {
	for _, n := range path[:len(path)-1] {
		m = m.Mutable(m.Descriptor().Fields().ByName(n)).Message()
	}
	return m
}

func scalar(fd protoreflect.FieldDescriptor, s string) (protoreflect.Value, error) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BoolKind:
		b, err := strconv.ParseBool(s)
		return protoreflect.ValueOfBool(b), err
	case protoreflect.EnumKind:
		n, err := parseEnum(fd.Enum(), s)
		return protoreflect.ValueOfEnum(n), err
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		n, err := strconv.ParseInt(s, 10, 32)
		return protoreflect.ValueOfInt32(int32(n)), err
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, err := strconv.ParseInt(s, 10, 64)
		return protoreflect.ValueOfInt64(n), err
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		n, err := strconv.ParseUint(s, 10, 32)
		return protoreflect.ValueOfUint32(uint32(n)), err
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		n, err := strconv.ParseUint(s, 10, 64)
		return protoreflect.ValueOfUint64(n), err
	case protoreflect.BytesKind:
		raw, err := readInput(s)
		return protoreflect.ValueOfBytes(raw), err
	case protoreflect.MessageKind:
		if isDuration(fd) {
			d, err := time.ParseDuration(s)
			if err != nil {
				return protoreflect.Value{}, err
			}
			return protoreflect.ValueOfMessage(durationpb.New(d).ProtoReflect()), nil
		}
	}
	return protoreflect.Value{}, fmt.Errorf("field %s cannot be set from the command line; use -f FILE", fd.Name())
}

func setValue(m protoreflect.Message, path []protoreflect.Name, fd protoreflect.FieldDescriptor, s string) error {
	v, err := scalar(fd, s)
	if err != nil {
		return err
	}
	parent(m, path).Set(fd, v)
	return nil
}

func applyFlag(c *cobra.Command, m protoreflect.Message, b flagBinding) error {
	fd := b.fd
	if !fd.IsList() {
		var s string
		if fd.Kind() == protoreflect.BoolKind {
			v, _ := c.Flags().GetBool(b.name)
			s = strconv.FormatBool(v)
		} else {
			s, _ = c.Flags().GetString(b.name)
		}
		return setValue(m, b.path, fd, s)
	}
	var vals []string
	if fd.Kind() == protoreflect.EnumKind {
		vals, _ = c.Flags().GetStringSlice(b.name)
	} else {
		vals, _ = c.Flags().GetStringArray(b.name)
	}
	list := parent(m, b.path).Mutable(fd).List()
	list.Truncate(0)
	for _, s := range vals {
		v, err := scalar(fd, s)
		if err != nil {
			return err
		}
		list.Append(v)
	}
	return nil
}

// readInput reads a file, or stdin for "-".
func readInput(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	raw, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return raw, nil
}

// readRequest fills req from a JSON or YAML file with the API's field names.
func readRequest(name string, req proto.Message) error {
	raw, err := readInput(name)
	if err != nil {
		return err
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := protojson.Unmarshal(js, req); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
