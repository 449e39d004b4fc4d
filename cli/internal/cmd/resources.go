package cmd

//lint:file-ignore SA1019 the deprecated OIDC provider RPCs are part of the interface (ZITADEL compatibility); this file calls them on purpose.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/gatehouse-id/gatehouse/cli/internal/output"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
)

// Table views shared by several commands.
var (
	userCols    = output.Cols("ID=id", "USER NAME=userName", "STATE=state", "LOGIN NAME=preferredLoginName")
	appCols     = output.Cols("ID=id", "NAME=name", "STATE=state", "CLIENT ID=oidcConfig.clientId", "API CLIENT ID=apiConfig.clientId", "ADMIN=adminClient")
	idpCols     = output.Cols("ID=id", "NAME=name", "STATE=state", "ISSUER=oidcConfig.issuer", "CLIENT ID=oidcConfig.clientId", "REDIRECT URI=redirectUri")
	keyCols     = output.Cols("ID=id", "TYPE=type", "EXPIRES=expirationDate", "CREATED=details.creationDate")
	detailsView = output.View{Columns: output.Cols("SEQUENCE=details.sequence", "CHANGED=details.changeDate", "RESOURCE OWNER=details.resourceOwner")}
	secretView  = output.View{Columns: output.Cols("CLIENT ID=clientId", "CLIENT SECRET=clientSecret")}
)

func group(use, short, example string, cmds ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Example: example}
	c.AddCommand(cmds...)
	return c
}

func (a *App) resourceCommands() []*cobra.Command {
	return []*cobra.Command{a.orgsCmd(), a.domainsCmd(), a.membersCmd(), a.usersCmd(), a.projectsCmd(), a.appsCmd(), a.idpsCmd(), a.keysCmd(), a.loginPolicyCmd(), a.securityPolicyCmd()}
}

func (a *App) orgsCmd() *cobra.Command {
	return group("orgs", "Organizations", "  gatehouse orgs list\n  gatehouse orgs create acme",
		a.rpcCommand(rpcCmd{
			use: "list", short: "List the organizations you hold a role in (all of them for an IAM owner)",
			example: "  gatehouse orgs list -o json",
			rpc:     mgmt(mc.ListOrgs), fromFile: true,
			view: output.View{Rows: "result", Columns: output.Cols("ID=id", "NAME=name", "STATE=state", "DOMAIN=primaryDomain")},
		}),
		a.rpcCommand(rpcCmd{
			use: "show", short: "Show your organization, or the one named by --org",
			example: "  gatehouse orgs show --org acme",
			rpc:     mgmt(mc.GetMyOrg),
			view:    output.View{Columns: output.Cols("ID=org.id", "NAME=org.name", "STATE=org.state", "DOMAIN=org.primaryDomain")},
		}),
		a.rpcCommand(rpcCmd{
			use: "create NAME", short: "Create an organization (IAM owners); you become its owner",
			example: "  gatehouse orgs create acme",
			rpc:     mgmt(mc.AddOrg), args: []string{"name"},
			view: output.View{Columns: output.Cols("ID=id", "DOMAIN=primaryDomain")},
		}),
	)
}

func (a *App) domainsCmd() *cobra.Command {
	return group("domains", "Domains of an organization: prove one to make its addresses' marks count",
		"  gatehouse domains add example.com --org acme\n  gatehouse domains validation example.com --type DOMAIN_VALIDATION_TYPE_DNS\n"+
			"  gatehouse domains validate example.com",
		a.rpcCommand(rpcCmd{
			use: "list", short: "List the organization's domains",
			example: "  gatehouse domains list --org acme",
			rpc:     mgmt(mc.ListOrgDomains), fromFile: true,
			view: output.View{Rows: "result", Columns: output.Cols("DOMAIN=domainName", "VERIFIED=isVerified", "PRIMARY=isPrimary",
				"VALIDATION=validationType")},
		}),
		a.rpcCommand(rpcCmd{
			use: "add DOMAIN", short: "Add a domain (unverified)",
			example: "  gatehouse domains add example.com",
			rpc:     mgmt(mc.AddOrgDomain), args: []string{"domain"}, view: detailsView,
		}),
		a.rpcCommand(rpcCmd{
			use: "validation DOMAIN --type TYPE", short: "Get a token that proves the domain, and where to put it (HTTP file or DNS TXT)",
			example: "  gatehouse domains validation example.com --type DOMAIN_VALIDATION_TYPE_DNS",
			rpc:     mgmt(mc.GenerateOrgDomainValidation), args: []string{"domain"}, flags: []string{"type"}, required: []string{"type"},
			view: output.View{Columns: output.Cols("TOKEN=token", "WHERE=url")},
		}),
		a.rpcCommand(rpcCmd{
			use: "validate DOMAIN", short: "Look for the token and verify the domain",
			example: "  gatehouse domains validate example.com",
			rpc:     mgmt(mc.ValidateOrgDomain), args: []string{"domain"}, view: detailsView,
		}),
		a.rpcCommand(rpcCmd{
			use: "set-primary DOMAIN", short: "Make a verified domain the primary one (login names follow)",
			example: "  gatehouse domains set-primary example.com",
			rpc:     mgmt(mc.SetPrimaryOrgDomain), args: []string{"domain"}, view: detailsView,
		}),
		a.rpcCommand(rpcCmd{
			use: "remove DOMAIN", short: "Remove a domain (not the primary one)",
			example: "  gatehouse domains remove example.com",
			rpc:     mgmt(mc.RemoveOrgDomain), args: []string{"domain"}, view: detailsView,
		}),
	)
}

func (a *App) membersCmd() *cobra.Command {
	return group("members", "Members of an organization and their roles",
		"  gatehouse members add 2870 --role ORG_OWNER --org acme\n  gatehouse members list --org acme",
		a.rpcCommand(rpcCmd{
			use: "list", short: "List the organization's members",
			example: "  gatehouse members list --org acme -o yaml",
			rpc:     mgmt(mc.ListOrgMembers),
			view:    output.View{Rows: "result", Columns: output.Cols("USER ID=userId", "USER NAME=userName", "ROLES=roles")},
		}),
		a.rpcCommand(rpcCmd{
			use: "add USER_ID", short: "Give a user roles in the organization (ORG_OWNER, ORG_USER_MANAGER)",
			example: "  gatehouse members add 2870 --role ORG_USER_MANAGER --org acme",
			rpc:     mgmt(mc.AddOrgMember), args: []string{"user_id"}, flags: []string{"role=roles"}, required: []string{"role"},
			view: detailsView,
		}),
		a.rpcCommand(rpcCmd{
			use: "remove USER_ID", short: "Remove a member (all its roles in the organization)",
			example: "  gatehouse members remove 2870 --org acme",
			rpc:     mgmt(mc.RemoveOrgMember), args: []string{"user_id"}, view: detailsView,
		}),
	)
}

func (a *App) usersCmd() *cobra.Command {
	profile := []string{"first-name=profile.first_name", "last-name=profile.last_name", "nick-name=profile.nick_name",
		"display-name=profile.display_name", "preferred-language=profile.preferred_language", "gender=profile.gender",
		"email=email.email", "email-verified=email.is_email_verified", "phone=phone.phone"}
	users := group("users", "Users (human and machine), their passwords, keys, secrets and metadata",
		"  gatehouse users list --org acme\n  gatehouse users add-human --user-name alice --first-name Alice --last-name Doe --email alice@example.com",
		a.rpcCommand(rpcCmd{
			use: "list", short: "List users (-f FILE for queries: the ListUsers request)",
			example: "  gatehouse users list --org acme -o json\n  gatehouse users list -f query.yaml",
			rpc:     mgmt(mc.ListUsers), fromFile: true, flags: []string{"limit=query.limit", "offset=query.offset"},
			view: output.View{Rows: "result", Columns: userCols},
		}),
		a.rpcCommand(rpcCmd{
			use: "show USER_ID", short: "Show a user", example: "  gatehouse users show 2870 -o yaml",
			rpc: mgmt(mc.GetUserByID), args: []string{"id"},
			view: output.View{Columns: output.Cols("ID=user.id", "USER NAME=user.userName", "STATE=user.state", "LOGIN NAME=user.preferredLoginName")},
		}),
		a.rpcCommand(rpcCmd{
			use: "add-human", short: "Create a human user",
			example: "  gatehouse users add-human --user-name alice --first-name Alice --last-name Doe --email alice@example.com --initial-password 'S3cret!pass'",
			rpc:     mgmt(mc.AddHumanUser), fromFile: true,
			flags: append([]string{"user_name", "initial_password"}, profile...),
			view:  output.View{Columns: output.Cols("USER ID=userId")},
		}),
		a.rpcCommand(rpcCmd{
			use: "import -f FILE", short: "Import a human user, with a password or a password hash (the ImportHumanUser request)",
			example: "  gatehouse users import -f alice.yaml",
			rpc:     mgmt(mc.ImportHumanUser), fromFile: true,
			flags: append([]string{"user_name", "password", "password_change_required"}, profile...),
			view:  output.View{Columns: output.Cols("USER ID=userId")},
		}),
		a.rpcCommand(rpcCmd{
			use: "add-machine", short: "Create a machine user (a service account)",
			example: "  gatehouse users add-machine --user-name ci --name 'CI pipeline' --access-token-type JWT",
			rpc:     mgmt(mc.AddMachineUser), flags: []string{"user_name", "name", "description", "access_token_type"},
			required: []string{"user-name", "name"},
			view:     output.View{Columns: output.Cols("USER ID=userId")},
		}),
		a.rpcCommand(rpcCmd{
			use: "set-password USER_ID", short: "Set a human user's password (changed at next login unless --no-change-required)",
			example: "  gatehouse users set-password 2870 --password 'N3w!password'",
			rpc:     mgmt(mc.SetHumanPassword), args: []string{"user_id"}, flags: []string{"password", "no_change_required"},
			required: []string{"password"}, view: detailsView,
		}),
		a.rpcCommand(rpcCmd{
			use: "reset-password USER_ID", short: "Mail a user a password reset link (one use, an hour; needs a mail relay)",
			example: "  gatehouse users reset-password 2870",
			rpc:     mgmt(mc.SendHumanResetPasswordNotification), args: []string{"user_id"}, view: detailsView,
		}),
		a.rpcCommand(rpcCmd{
			use: "password-reset USER_ID [-f FILE]", short: "Start a password reset: mail the link, or with {\"returnCode\": {}} print the code",
			example: "  gatehouse users password-reset 2870\n  echo '{\"returnCode\": {}}' | gatehouse users password-reset 2870 -f -",
			rpc:     mgmt(mc.PasswordReset), args: []string{"user_id"}, fromFile: true,
			view: output.View{Columns: output.Cols("CODE=verificationCode")},
		}),
		a.rpcCommand(rpcCmd{
			use: "set-password-with-code USER_ID --code CODE --password P", short: "Set a password with a reset code (ends the user's sessions)",
			example: "  gatehouse users set-password-with-code 2870 --code LHBFTP3ZIVYMRBSCBLDRSOFYPU --password 'N3w!password'",
			rpc:     mgmt(mc.SetPassword), args: []string{"user_id"},
			flags:    []string{"code=verification_code", "password=new_password.password", "change_required=new_password.change_required"},
			required: []string{"code", "password"}, view: detailsView,
		}),
		a.rpcCommand(rpcCmd{
			use: "set-email USER_ID --email ADDR", short: "Change a user's e-mail address (verification mail, or --verified)",
			example: "  gatehouse users set-email 2870 --email ada@example.com\n  gatehouse users set-email 2870 --email ada@example.com --verified",
			rpc:     mgmt(mc.UpdateHumanEmail), args: []string{"user_id"}, flags: []string{"email", "verified=is_email_verified"},
			required: []string{"email"}, view: detailsView,
		}),
		a.rpcCommand(rpcCmd{
			use: "resend-verification USER_ID", short: "Mail a user a new code for its unverified address (needs a mail relay)",
			example: "  gatehouse users resend-verification 2870",
			rpc:     mgmt(mc.ResendHumanEmailVerification), args: []string{"user_id"}, view: detailsView,
		}),
		a.rpcCommand(rpcCmd{
			use: "resend-invitation USER_ID [--email ADDR]", short: "Mail a user without a password a new invitation (needs a mail relay)",
			example: "  gatehouse users resend-invitation 2870\n  gatehouse users resend-invitation 2870 --email ada@example.com",
			rpc:     mgmt(mc.ResendHumanInitialization), args: []string{"user_id"}, flags: []string{"email"}, view: detailsView,
		}),
		a.rpcCommand(rpcCmd{
			use: "email-set USER_ID -f FILE", short: "Set an address (v2): mail a code, or with {\"returnCode\": {}} print it",
			example: "  echo '{\"email\": \"ada@example.com\", \"returnCode\": {}}' | gatehouse users email-set 2870 -f -",
			rpc:     mgmt(mc.SetEmail), args: []string{"user_id"}, fromFile: true,
			view: output.View{Columns: output.Cols("CODE=verificationCode")},
		}),
		a.rpcCommand(rpcCmd{
			use: "verify-email USER_ID --code CODE", short: "Verify a user's address with the code it was sent",
			example: "  gatehouse users verify-email 2870 --code LHBFTP3ZIVYMRBSCBLDRSOFYPU",
			rpc:     mgmt(mc.VerifyEmail), args: []string{"user_id"}, flags: []string{"code=verification_code"},
			required: []string{"code"}, view: detailsView,
		}),
		a.rpcCommand(rpcCmd{
			use: "email-code USER_ID [-f FILE]", short: "Send a new address code (v2), or with {\"returnCode\": {}} print it",
			example: "  gatehouse users email-code 2870\n  echo '{\"returnCode\": {}}' | gatehouse users email-code 2870 -f -",
			rpc:     mgmt(mc.ResendEmailCode), args: []string{"user_id"}, fromFile: true,
			view: output.View{Columns: output.Cols("CODE=verificationCode")},
		}),
		a.rpcCommand(rpcCmd{use: "deactivate USER_ID", short: "Deactivate a user (cannot sign in)", example: "  gatehouse users deactivate 2870",
			rpc: mgmt(mc.DeactivateUser), args: []string{"id"}, view: detailsView}),
		a.rpcCommand(rpcCmd{use: "reactivate USER_ID", short: "Reactivate a user", example: "  gatehouse users reactivate 2870",
			rpc: mgmt(mc.ReactivateUser), args: []string{"id"}, view: detailsView}),
		a.rpcCommand(rpcCmd{use: "unlock USER_ID", short: "Lift a user's delay or lock after failed passwords, at once", example: "  gatehouse users unlock 2870",
			rpc: mgmt(mc.UnlockUser), args: []string{"id"}, view: detailsView}),
		a.rpcCommand(rpcCmd{use: "remove USER_ID", short: "Remove a user", example: "  gatehouse users remove 2870",
			rpc: mgmt(mc.RemoveUser), args: []string{"id"}, view: detailsView}),
		group("metadata", "A user's metadata", "  gatehouse users metadata set 2870 plan gold\n  gatehouse users metadata list 2870",
			a.rpcCommand(rpcCmd{use: "set USER_ID KEY VALUE", short: "Set a metadata value", example: "  gatehouse users metadata set 2870 plan gold",
				rpc: mgmt(mc.SetUserMetadata), args: []string{"id", "key", "value"}, view: detailsView}),
			a.rpcCommand(rpcCmd{use: "get USER_ID KEY", short: "Get a metadata value", example: "  gatehouse users metadata get 2870 plan",
				rpc: mgmt(mc.GetUserMetadata), args: []string{"id", "key"},
				view: output.View{Columns: output.Cols("KEY=metadata.key", "VALUE=metadata.value")}}),
			a.rpcCommand(rpcCmd{use: "list USER_ID", short: "List a user's metadata", example: "  gatehouse users metadata list 2870 -o json",
				rpc: mgmt(mc.ListUserMetadata), args: []string{"id"},
				view: output.View{Rows: "result", Columns: output.Cols("KEY=key", "VALUE=value")}}),
			a.rpcCommand(rpcCmd{use: "remove USER_ID KEY", short: "Remove a metadata value", example: "  gatehouse users metadata remove 2870 plan",
				rpc: mgmt(mc.RemoveUserMetadata), args: []string{"id", "key"}, view: detailsView}),
			a.rpcCommand(rpcCmd{use: "bulk-set USER_ID -f FILE", short: "Set several values (the BulkSetUserMetadata request; values base64)",
				example: "  gatehouse users metadata bulk-set 2870 -f metadata.yaml",
				rpc:     mgmt(mc.BulkSetUserMetadata), args: []string{"id"}, fromFile: true, view: detailsView}),
			a.rpcCommand(rpcCmd{use: "bulk-remove USER_ID --key K...", short: "Remove several values",
				example: "  gatehouse users metadata bulk-remove 2870 --key plan --key tier",
				rpc:     mgmt(mc.BulkRemoveUserMetadata), args: []string{"id"}, flags: []string{"key=keys"}, required: []string{"key"}, view: detailsView}),
		),
		group("keys", "A machine user's keys (JWT profile)", "  gatehouse users keys add 2870 --out ci-key.json",
			a.rpcCommand(rpcCmd{use: "add USER_ID", short: "Add a key: a generated one is written to --out (0600), or register --public-key",
				example: "  gatehouse users keys add 2870 --out ci-key.json\n  gatehouse users keys add 2870 --public-key ci.pub.pem",
				rpc:     mgmt(mc.AddMachineKey), args: []string{"user_id"}, flags: []string{"public_key", "expiration-date=expiration_date"},
				before: keyTypeJSON, after: a.writeKeyDetails}, keyOutFlags),
			a.rpcCommand(rpcCmd{use: "list USER_ID", short: "List a machine user's keys", example: "  gatehouse users keys list 2870",
				rpc: mgmt(mc.ListMachineKeys), args: []string{"user_id"}, view: output.View{Rows: "result", Columns: keyCols}}),
			a.rpcCommand(rpcCmd{use: "remove USER_ID KEY_ID", short: "Remove a key", example: "  gatehouse users keys remove 2870 3001",
				rpc: mgmt(mc.RemoveMachineKey), args: []string{"user_id", "key_id"}, view: detailsView}),
		),
		group("secret", "A machine user's client secret (client credentials)", "  gatehouse users secret generate 2870",
			a.rpcCommand(rpcCmd{use: "generate USER_ID", short: "Generate (or replace) the secret; it is shown once",
				example: "  gatehouse users secret generate 2870 -o json",
				rpc:     mgmt(mc.GenerateMachineSecret), args: []string{"user_id"}, view: secretView}),
			a.rpcCommand(rpcCmd{use: "remove USER_ID", short: "Remove the secret", example: "  gatehouse users secret remove 2870",
				rpc: mgmt(mc.RemoveMachineSecret), args: []string{"user_id"}, view: detailsView}),
		),
		group("factors", "A human user's factors: TOTP generator, security keys, passkeys",
			"  gatehouse users factors list 2870\n  gatehouse users factors totp register 2870",
			a.rpcCommand(rpcCmd{use: "list USER_ID", short: "List a user's second factors and their state", example: "  gatehouse users factors list 2870",
				rpc: mgmt(mc.ListHumanAuthFactors), args: []string{"user_id"},
				view: output.View{Rows: "result", Columns: output.Cols("STATE=state", "OTP=otp", "U2F=u2f.name")}}),
			a.rpcCommand(rpcCmd{use: "remove-otp USER_ID", short: "Remove a user's TOTP generator (ends its sessions when it is not yours)",
				example: "  gatehouse users factors remove-otp 2870",
				rpc:     mgmt(mc.RemoveHumanAuthFactorOTP), args: []string{"user_id"}, view: detailsView}),
			group("totp", "Set up a TOTP generator (your own, or as a user manager a user's)",
				"  gatehouse users factors totp register 2870\n  gatehouse users factors totp verify 2870 123456",
				a.rpcCommand(rpcCmd{use: "register USER_ID", short: "Start a TOTP registration: the otpauth:// URI and the secret, shown once",
					example: "  gatehouse users factors totp register 2870 -o json",
					rpc:     mgmt(mc.RegisterTOTP), args: []string{"user_id"},
					view: output.View{Columns: output.Cols("URI=uri", "SECRET=secret")}}),
				a.rpcCommand(rpcCmd{use: "verify USER_ID CODE", short: "Complete the registration with a code of the new generator",
					example: "  gatehouse users factors totp verify 2870 123456",
					rpc:     mgmt(mc.VerifyTOTPRegistration), args: []string{"user_id", "code"}, view: detailsView}),
				a.rpcCommand(rpcCmd{use: "remove USER_ID", short: "Remove the TOTP generator (the v2 user service's RemoveTOTP)",
					example: "  gatehouse users factors totp remove 2870",
					rpc:     mgmt(mc.RemoveTOTP), args: []string{"user_id"}, view: detailsView}),
			),
			a.rpcCommand(rpcCmd{use: "remove-u2f USER_ID TOKEN_ID", short: "Remove a user's security key (ends its sessions when it is not yours)",
				example: "  gatehouse users factors remove-u2f 2870 3300",
				rpc:     mgmt(mc.RemoveHumanAuthFactorU2F), args: []string{"user_id", "token_id"}, view: detailsView}),
			a.rpcCommand(rpcCmd{use: "list-passwordless USER_ID", short: "List a user's passkeys (management v1)",
				example: "  gatehouse users factors list-passwordless 2870",
				rpc:     mgmt(mc.ListHumanPasswordless), args: []string{"user_id"},
				view: output.View{Rows: "result", Columns: output.Cols("ID=id", "NAME=name", "STATE=state")}}),
			a.rpcCommand(rpcCmd{use: "remove-passwordless USER_ID TOKEN_ID", short: "Remove a user's passkey (ends its sessions when it is not yours)",
				example: "  gatehouse users factors remove-passwordless 2870 3301",
				rpc:     mgmt(mc.RemoveHumanPasswordless), args: []string{"user_id", "token_id"}, view: detailsView}),
			group("u2f", "Register a security key (WebAuthn): the browser's navigator.credentials.create answers the options",
				"  gatehouse users factors u2f register 2870 -o json\n  gatehouse users factors u2f verify 2870 3300 \"YubiKey\" -f credential.json",
				a.rpcCommand(rpcCmd{use: "register USER_ID", short: "Start a registration: the key's id and the PublicKeyCredentialCreationOptions (-o json)",
					example: "  gatehouse users factors u2f register 2870 -o json",
					rpc:     mgmt(mc.RegisterU2F), args: []string{"user_id"}, flags: []string{"domain"},
					view: output.View{Columns: output.Cols("ID=u2fId")}}),
				a.rpcCommand(rpcCmd{use: "verify USER_ID U2F_ID NAME", short: "Complete it with the browser's PublicKeyCredential ({\"publicKeyCredential\": ...} in -f FILE)",
					example: "  gatehouse users factors u2f verify 2870 3300 \"YubiKey\" -f credential.json",
					rpc:     mgmt(mc.VerifyU2FRegistration), args: []string{"user_id", "u2f_id", "token_name"}, fromFile: true, view: detailsView}),
				a.rpcCommand(rpcCmd{use: "remove USER_ID U2F_ID", short: "Remove a security key (the v2 user service's RemoveU2F)",
					example: "  gatehouse users factors u2f remove 2870 3300",
					rpc:     mgmt(mc.RemoveU2F), args: []string{"user_id", "u2f_id"}, view: detailsView}),
			),
			group("passkeys", "Passkeys (WebAuthn, passwordless sign-in): register, list, remove",
				"  gatehouse users factors passkeys list 2870\n  gatehouse users factors passkeys register 2870 -o json",
				a.rpcCommand(rpcCmd{use: "list USER_ID", short: "List a user's passkeys", example: "  gatehouse users factors passkeys list 2870",
					rpc: mgmt(mc.ListPasskeys), args: []string{"user_id"},
					view: output.View{Rows: "result", Columns: output.Cols("ID=id", "NAME=name", "STATE=state")}}),
				a.rpcCommand(rpcCmd{use: "register USER_ID", short: "Start a registration: the passkey's id and the PublicKeyCredentialCreationOptions (-o json)",
					example: "  gatehouse users factors passkeys register 2870 -o json",
					rpc:     mgmt(mc.RegisterPasskey), args: []string{"user_id"}, flags: []string{"domain"},
					view: output.View{Columns: output.Cols("ID=passkeyId")}}),
				a.rpcCommand(rpcCmd{use: "verify USER_ID PASSKEY_ID NAME", short: "Complete it with the browser's PublicKeyCredential ({\"publicKeyCredential\": ...} in -f FILE)",
					example: "  gatehouse users factors passkeys verify 2870 3301 \"Laptop\" -f credential.json",
					rpc:     mgmt(mc.VerifyPasskeyRegistration), args: []string{"user_id", "passkey_id", "passkey_name"}, fromFile: true, view: detailsView}),
				a.rpcCommand(rpcCmd{use: "remove USER_ID PASSKEY_ID", short: "Remove a passkey",
					example: "  gatehouse users factors passkeys remove 2870 3301",
					rpc:     mgmt(mc.RemovePasskey), args: []string{"user_id", "passkey_id"}, view: detailsView}),
			),
		),
		group("idps", "A user's links to external identity providers", "  gatehouse users idps list 2870",
			a.rpcCommand(rpcCmd{use: "list USER_ID", short: "List a user's external identities", example: "  gatehouse users idps list 2870",
				rpc: mgmt(mc.ListUserIDPs), args: []string{"user_id"},
				view: output.View{Rows: "result", Columns: output.Cols("IDP ID=idpId", "IDP=idpName", "EXTERNAL USER=providedUserId", "EXTERNAL NAME=providedUserName")}}),
			a.rpcCommand(rpcCmd{use: "remove USER_ID IDP_ID LINKED_USER_ID", short: "Remove a link", example: "  gatehouse users idps remove 2870 3100 248289761001",
				rpc: mgmt(mc.RemoveUserIDP), args: []string{"user_id", "idp_id", "linked_user_id"}, view: detailsView}),
		),
	)
	return users
}

func (a *App) projectsCmd() *cobra.Command {
	return group("projects", "Projects (they hold applications) and their grants to other organizations",
		"  gatehouse projects create Shop\n  gatehouse projects list",
		a.rpcCommand(rpcCmd{use: "list", short: "List projects", example: "  gatehouse projects list -o json",
			rpc: mgmt(mc.ListProjects), fromFile: true,
			view: output.View{Rows: "result", Columns: output.Cols("ID=id", "NAME=name", "STATE=state")}}),
		a.rpcCommand(rpcCmd{use: "show PROJECT_ID", short: "Show a project", example: "  gatehouse projects show 2900",
			rpc: mgmt(mc.GetProjectByID), args: []string{"id"},
			view: output.View{Columns: output.Cols("ID=project.id", "NAME=project.name", "STATE=project.state")}}),
		a.rpcCommand(rpcCmd{use: "create NAME", short: "Create a project", example: "  gatehouse projects create Shop",
			rpc: mgmt(mc.AddProject), args: []string{"name"}, fromFile: true,
			flags: []string{"project_role_assertion", "project_role_check", "has_project_check"},
			view:  output.View{Columns: output.Cols("ID=id")}}),
		group("grants", "Grants of a project to other organizations (their users may sign in to its apps)",
			"  gatehouse projects grants add 2900 --granted-org-id 3000",
			a.rpcCommand(rpcCmd{use: "add PROJECT_ID", short: "Grant the project to an organization",
				example: "  gatehouse projects grants add 2900 --granted-org-id 3000",
				rpc:     mgmt(mc.AddProjectGrant), args: []string{"project_id"}, flags: []string{"granted_org_id"}, required: []string{"granted-org-id"},
				view: output.View{Columns: output.Cols("GRANT ID=grantId")}}),
			a.rpcCommand(rpcCmd{use: "list PROJECT_ID", short: "List a project's grants", example: "  gatehouse projects grants list 2900",
				rpc: mgmt(mc.ListProjectGrants), args: []string{"project_id"},
				view: output.View{Rows: "result", Columns: output.Cols("GRANT ID=grantId", "ORG ID=grantedOrgId", "ORG=grantedOrgName", "STATE=state")}}),
			a.rpcCommand(rpcCmd{use: "update PROJECT_ID GRANT_ID", short: "Update a grant", example: "  gatehouse projects grants update 2900 3050",
				rpc: mgmt(mc.UpdateProjectGrant), args: []string{"project_id", "grant_id"}, flags: []string{"role-key=role_keys"}, view: detailsView}),
			a.rpcCommand(rpcCmd{use: "remove PROJECT_ID GRANT_ID", short: "Remove a grant", example: "  gatehouse projects grants remove 2900 3050",
				rpc: mgmt(mc.RemoveProjectGrant), args: []string{"project_id", "grant_id"}, view: detailsView}),
			a.rpcCommand(rpcCmd{use: "received", short: "List the grants other organizations made to this one",
				example: "  gatehouse projects grants received --org partner",
				rpc:     mgmt(mc.ListGrantedProjects),
				view: output.View{Rows: "result", Columns: output.Cols("GRANT ID=grantId", "PROJECT ID=projectId", "PROJECT=projectName",
					"OWNER ID=projectOwnerId", "OWNER=projectOwnerName", "STATE=state")}}),
			a.rpcCommand(rpcCmd{use: "refuse PROJECT_ID GRANT_ID", short: "Refuse a grant made to this organization (its users' tokens for the project end)",
				example: "  gatehouse projects grants refuse 2900 3050 --org partner",
				rpc:     mgmt(mc.RefuseGrantedProject), args: []string{"project_id", "grant_id"}, view: detailsView}),
		),
	)
}

func (a *App) appsCmd() *cobra.Command {
	oidc := []string{"redirect-uri=redirect_uris", "response-type=response_types", "grant-type=grant_types", "app_type",
		"auth_method_type", "post-logout-redirect-uri=post_logout_redirect_uris", "dev_mode", "access_token_type",
		"access_token_role_assertion", "id_token_role_assertion", "id_token_userinfo_assertion", "clock_skew",
		"additional-origin=additional_origins", "back_channel_logout_uri", "require-par=require_pushed_authorization_requests",
		"require-dpop=dpop_bound_access_tokens"}
	return group("apps", "Applications of a project: OIDC relying parties and APIs",
		"  gatehouse apps create-oidc 2900 --name web --redirect-uri https://app.example.com/cb --grant-type AUTHORIZATION_CODE --response-type CODE --app-type WEB --auth-method-type BASIC",
		a.rpcCommand(rpcCmd{use: "list PROJECT_ID", short: "List a project's applications", example: "  gatehouse apps list 2900 -o json",
			rpc: mgmt(mc.ListApps), args: []string{"project_id"}, fromFile: true,
			view: output.View{Rows: "result", Columns: appCols}}),
		a.rpcCommand(rpcCmd{use: "show PROJECT_ID APP_ID", short: "Show an application (never its secret)", example: "  gatehouse apps show 2900 2950 -o yaml",
			rpc: mgmt(mc.GetAppByID), args: []string{"project_id", "app_id"},
			view: output.View{Columns: output.Cols("ID=app.id", "NAME=app.name", "STATE=app.state", "CLIENT ID=app.oidcConfig.clientId", "REDIRECT URIS=app.oidcConfig.redirectUris")}}),
		a.rpcCommand(rpcCmd{use: "create-oidc PROJECT_ID --name NAME", short: "Create an OIDC application; a client secret is shown once",
			example: "  gatehouse apps create-oidc 2900 --name web --redirect-uri https://app.example.com/cb --grant-type AUTHORIZATION_CODE --response-type CODE --app-type WEB --auth-method-type BASIC",
			rpc:     mgmt(mc.AddOIDCApp), args: []string{"project_id"}, fromFile: true, flags: append([]string{"name"}, oidc...),
			view: output.View{Columns: output.Cols("APP ID=appId", "CLIENT ID=clientId", "CLIENT SECRET=clientSecret", "NON-COMPLIANT=noneCompliant")}}),
		a.rpcCommand(rpcCmd{use: "update-oidc PROJECT_ID APP_ID", short: "Update an OIDC application's configuration (the whole configuration: unset fields are reset)",
			example: "  gatehouse apps update-oidc 2900 2950 -f web.yaml --redirect-uri https://app.example.com/cb2",
			rpc:     mgmt(mc.UpdateOIDCAppConfig), args: []string{"project_id", "app_id"}, fromFile: true, flags: oidc, view: detailsView}),
		a.rpcCommand(rpcCmd{use: "create-api PROJECT_ID --name NAME", short: "Create an API application (a resource server that introspects tokens)",
			example: "  gatehouse apps create-api 2900 --name orders-api --auth-method-type PRIVATE_KEY_JWT",
			rpc:     mgmt(mc.AddAPIApp), args: []string{"project_id"}, flags: []string{"name", "auth_method_type"}, required: []string{"name"},
			view: output.View{Columns: output.Cols("APP ID=appId", "CLIENT ID=clientId", "CLIENT SECRET=clientSecret")}}),
		a.rpcCommand(rpcCmd{use: "regenerate-secret PROJECT_ID APP_ID", short: "Replace an application's client secret; the new one is shown once",
			example: "  gatehouse apps regenerate-secret 2900 2950 -o json",
			rpc:     mgmt(mc.RegenerateOIDCClientSecret), args: []string{"project_id", "app_id"},
			view: output.View{Columns: output.Cols("CLIENT SECRET=clientSecret")}}),
		a.rpcCommand(rpcCmd{use: "set-admin PROJECT_ID APP_ID", short: "Mark (or with --admin-client=false unmark) an admin client (IAM owners)",
			example: "  gatehouse apps set-admin 2900 2950 --admin-client",
			rpc:     mgmt(mc.SetAppAdminClient), args: []string{"project_id", "app_id"}, flags: []string{"admin_client"},
			// Marking replaces the app's secret: shown once, here.
			view: output.View{Columns: output.Cols("CLIENT SECRET=clientSecret")}}),
		group("keys", "An application's keys (private_key_jwt)", "  gatehouse apps keys add 2900 2950 --out app-key.json",
			a.rpcCommand(rpcCmd{use: "add PROJECT_ID APP_ID", short: "Add a key: a generated one is written to --out (0600), or register --public-key",
				example: "  gatehouse apps keys add 2900 2950 --out app-key.json",
				rpc:     mgmt(mc.AddAppKey), args: []string{"project_id", "app_id"}, flags: []string{"public_key", "expiration-date=expiration_date"},
				before: keyTypeJSON, after: a.writeKeyDetails}, keyOutFlags),
			a.rpcCommand(rpcCmd{use: "remove PROJECT_ID APP_ID KEY_ID", short: "Remove a key", example: "  gatehouse apps keys remove 2900 2950 3001",
				rpc: mgmt(mc.RemoveAppKey), args: []string{"project_id", "app_id", "key_id"}, view: detailsView}),
		),
	)
}

func (a *App) idpsCmd() *cobra.Command {
	cfg := []string{"client_id", "client_secret", "issuer", "scope=scopes", "display_name_mapping", "username_mapping"}
	return group("idps", "External OpenID Connect identity providers of an organization",
		"  gatehouse idps add-oidc --name Google --issuer https://accounts.google.com --client-id ID --client-secret SECRET --scope openid --scope email",
		a.rpcCommand(rpcCmd{use: "list", short: "List identity providers", example: "  gatehouse idps list --org acme",
			rpc: mgmt(mc.ListOrgIDPs), fromFile: true,
			view: output.View{Rows: "result", Columns: output.Cols("ID=id", "NAME=name", "STATE=state", "ISSUER=oidcConfig.issuer")}}),
		a.rpcCommand(rpcCmd{use: "show IDP_ID", short: "Show an identity provider and the redirect URI to register with it",
			example: "  gatehouse idps show 3100 -o yaml",
			rpc:     mgmt(mc.GetOrgIDPByID), args: []string{"id"},
			after: a.printIDP}),
		a.rpcCommand(rpcCmd{use: "add-oidc --name NAME --issuer URL --client-id ID", short: "Add an OIDC identity provider",
			example: "  gatehouse idps add-oidc --name Google --issuer https://accounts.google.com --client-id ID --client-secret \"$SECRET\" --scope openid --scope email --auto-register",
			rpc:     mgmt(mc.AddOrgOIDCIDP), fromFile: true, flags: append([]string{"name", "styling_type", "auto_register"}, cfg...),
			after: a.printIDPAdded}),
		a.rpcCommand(rpcCmd{use: "update IDP_ID", short: "Update an identity provider's OIDC configuration (a missing secret keeps the old one)",
			example: "  gatehouse idps update 3100 --issuer https://accounts.google.com --client-id ID --scope openid",
			rpc:     mgmt(mc.UpdateOrgIDPOIDCConfig), args: []string{"idp_id"}, fromFile: true, flags: cfg, view: detailsView}),
		a.rpcCommand(rpcCmd{use: "deactivate IDP_ID", short: "Deactivate an identity provider", example: "  gatehouse idps deactivate 3100",
			rpc: mgmt(mc.DeactivateOrgIDP), args: []string{"idp_id"}, view: detailsView}),
		a.rpcCommand(rpcCmd{use: "reactivate IDP_ID", short: "Reactivate an identity provider", example: "  gatehouse idps reactivate 3100",
			rpc: mgmt(mc.ReactivateOrgIDP), args: []string{"idp_id"}, view: detailsView}),
		a.rpcCommand(rpcCmd{use: "remove IDP_ID", short: "Remove an identity provider and its users' links", example: "  gatehouse idps remove 3100",
			rpc: mgmt(mc.RemoveOrgIDP), args: []string{"idp_id"}, view: detailsView}),
		a.rpcCommand(rpcCmd{use: "trust IDP_ID", short: "Record (or with --trust-amr=false stop recording) the provider's amr values (IAM owners)",
			example: "  gatehouse idps trust 3100 --trust-amr",
			rpc:     mgmt(mc.SetOrgIDPTrust), args: []string{"idp_id"}, flags: []string{"trust_amr"}, view: detailsView}),
	)
}

func (a *App) keysCmd() *cobra.Command {
	return group("keys", "The instance's token signing keys (IAM owners)", "  gatehouse keys list\n  gatehouse keys rotate",
		a.rpcCommand(rpcCmd{use: "list", short: "List the signing keys", example: "  gatehouse keys list -o json",
			rpc:  admin(ac.ListSigningKeys),
			view: output.View{Rows: "keys", Columns: output.Cols("KEY ID=keyId", "ALGORITHM=algorithm", "STATE=state", "CREATED=created", "SIGNS FROM=signFrom", "EXPIRES=expires")}}),
		a.rpcCommand(rpcCmd{use: "rotate", short: "Add a signing key; it is published now and signs once caches have it",
			example: "  gatehouse keys rotate --algorithm ES256",
			rpc:     admin(ac.RotateSigningKey), flags: []string{"algorithm"},
			view: output.View{Columns: output.Cols("KEY ID=keyId", "ALGORITHM=algorithm", "PUBLISHED=publishAt", "SIGNS FROM=signFrom")}}),
	)
}

func (a *App) loginPolicyCmd() *cobra.Command {
	policy := []string{"allow_username_password", "allow_register", "allow_external_idp", "force_mfa", "hide_password_reset",
		"ignore_unknown_usernames", "default_redirect_uri", "password_check_lifetime", "external_login_check_lifetime",
		"allow_domain_discovery", "disable_login_with_email", "disable_login_with_phone", "require_verified_email"}
	return group("login-policy", "The organization's login policy", "  gatehouse login-policy show --org acme",
		a.rpcCommand(rpcCmd{use: "show", short: "Show the login policy in force (the default or the organization's own)",
			example: "  gatehouse login-policy show -o yaml", rpc: mgmt(mc.GetLoginPolicy)}),
		a.rpcCommand(rpcCmd{use: "create", short: "Give the organization its own login policy",
			example: "  gatehouse login-policy create --allow-username-password --allow-external-idp",
			rpc:     mgmt(mc.AddCustomLoginPolicy), fromFile: true, flags: policy, view: detailsView}),
		a.rpcCommand(rpcCmd{use: "update", short: "Update the organization's own login policy (the whole policy)",
			example: "  gatehouse login-policy update -f policy.yaml",
			rpc:     mgmt(mc.UpdateCustomLoginPolicy), fromFile: true, flags: policy, view: detailsView}),
		a.rpcCommand(rpcCmd{use: "reset", short: "Go back to the default login policy", example: "  gatehouse login-policy reset --org acme",
			rpc: mgmt(mc.ResetLoginPolicyToDefault), view: detailsView}),
		group("second-factors", "The second factors the policy offers (SECOND_FACTOR_TYPE_OTP, SECOND_FACTOR_TYPE_U2F)",
			"  gatehouse login-policy second-factors add SECOND_FACTOR_TYPE_OTP",
			a.rpcCommand(rpcCmd{use: "list", short: "List the policy's second factors", example: "  gatehouse login-policy second-factors list",
				rpc: mgmt(mc.ListLoginPolicySecondFactors), view: output.View{Rows: "result", Columns: output.Cols("TYPE=")}}),
			a.rpcCommand(rpcCmd{use: "add TYPE", short: "Add a second factor to the organization's own policy",
				example: "  gatehouse login-policy second-factors add SECOND_FACTOR_TYPE_OTP",
				rpc:     mgmt(mc.AddSecondFactorToLoginPolicy), args: []string{"type"}, view: detailsView}),
			a.rpcCommand(rpcCmd{use: "remove TYPE", short: "Remove a second factor from the organization's own policy",
				example: "  gatehouse login-policy second-factors remove SECOND_FACTOR_TYPE_U2F",
				rpc:     mgmt(mc.RemoveSecondFactorFromLoginPolicy), args: []string{"type"}, view: detailsView}),
		),
		group("multi-factors", "The multi factors the policy offers (MULTI_FACTOR_TYPE_U2F_WITH_VERIFICATION)",
			"  gatehouse login-policy multi-factors add MULTI_FACTOR_TYPE_U2F_WITH_VERIFICATION",
			a.rpcCommand(rpcCmd{use: "list", short: "List the policy's multi factors", example: "  gatehouse login-policy multi-factors list",
				rpc: mgmt(mc.ListLoginPolicyMultiFactors), view: output.View{Rows: "result", Columns: output.Cols("TYPE=")}}),
			a.rpcCommand(rpcCmd{use: "add TYPE", short: "Add a multi factor to the organization's own policy",
				example: "  gatehouse login-policy multi-factors add MULTI_FACTOR_TYPE_U2F_WITH_VERIFICATION",
				rpc:     mgmt(mc.AddMultiFactorToLoginPolicy), args: []string{"type"}, view: detailsView}),
			a.rpcCommand(rpcCmd{use: "remove TYPE", short: "Remove a multi factor from the organization's own policy",
				example: "  gatehouse login-policy multi-factors remove MULTI_FACTOR_TYPE_U2F_WITH_VERIFICATION",
				rpc:     mgmt(mc.RemoveMultiFactorFromLoginPolicy), args: []string{"type"}, view: detailsView}),
		),
	)
}

func (a *App) securityPolicyCmd() *cobra.Command {
	return group("security-policy", "The organization's security policy (impersonation through token exchange)",
		"  gatehouse security-policy set --enable-impersonation --org acme",
		a.rpcCommand(rpcCmd{use: "show", short: "Show the security policy", example: "  gatehouse security-policy show",
			rpc: mgmt(mc.GetSecurityPolicy)}),
		a.rpcCommand(rpcCmd{use: "set", short: "Set the security policy (--enable-impersonation=false turns impersonation off)",
			example: "  gatehouse security-policy set --enable-impersonation",
			rpc:     mgmt(mc.SetSecurityPolicy), flags: []string{"enable_impersonation"}, view: detailsView}),
	)
}

// keyOutFlags adds --out and --print to a command that may create a key.
func keyOutFlags(c *cobra.Command) {
	c.Flags().String("out", "", "write a generated key file here (0600; must not exist)")
	c.Flags().Bool("print", false, "print a generated key file instead of writing it")
}

// keyTypeJSON asks for a JSON key file (the only type).
func keyTypeJSON(_ context.Context, _ *App, c *cobra.Command, _ *clients, req proto.Message) error {
	pub, _ := c.Flags().GetString("public-key")
	out, _ := c.Flags().GetString("out")
	printIt, _ := c.Flags().GetBool("print")
	if pub == "" && out == "" && !printIt {
		return errors.New("give --out FILE for the generated key file (or --print, or --public-key to register your own)")
	}
	switch r := req.(type) {
	case *managementv1.AddMachineKeyRequest:
		r.Type = managementv1.KeyType_KEY_TYPE_JSON
	case *managementv1.AddAppKeyRequest:
		r.Type = managementv1.KeyType_KEY_TYPE_JSON
	}
	return nil
}

// writeKeyDetails writes a generated key file 0600 (or prints it with
// --print) and prints the key id.
func (a *App) writeKeyDetails(_ *App, c *cobra.Command, res proto.Message) error {
	var id string
	var details []byte
	switch r := res.(type) {
	case *managementv1.AddMachineKeyResponse:
		id, details = r.GetKeyId(), r.GetKeyDetails()
	case *managementv1.AddAppKeyResponse:
		id, details = r.GetId(), r.GetKeyDetails()
	}
	if len(details) > 0 {
		if p, _ := c.Flags().GetBool("print"); p {
			_, err := fmt.Fprintf(a.Stdout, "%s\n", details)
			return err
		}
		out, _ := c.Flags().GetString("out")
		if err := writeSecretFile(out, details); err != nil {
			return err
		}
		fmt.Fprintf(a.Stderr, "Wrote the key file to %s (0600).\n", out)
	}
	return output.PrintValue(a.Stdout, a.format, map[string]any{"keyId": id}, output.View{Columns: output.Cols("KEY ID=keyId")})
}

func (a *App) printIDP(_ *App, c *cobra.Command, res proto.Message) error {
	v, err := output.Generic(res)
	if err != nil {
		return err
	}
	idp, _ := output.Lookup(v, "idp").(map[string]any)
	if idp != nil {
		idp["redirectUri"] = a.idpRedirectURI(c)
	}
	return output.PrintValue(a.Stdout, a.format, v, output.View{Columns: prefixed("idp.", idpCols)})
}

func (a *App) printIDPAdded(_ *App, c *cobra.Command, res proto.Message) error {
	v, err := output.Generic(res)
	if err != nil {
		return err
	}
	m, _ := v.(map[string]any)
	m["redirectUri"] = a.idpRedirectURI(c)
	fmt.Fprintf(a.Stderr, "Register this redirect URI with the identity provider: %s\n", m["redirectUri"])
	return output.PrintValue(a.Stdout, a.format, m, output.View{Columns: output.Cols("IDP ID=idpId", "REDIRECT URI=redirectUri")})
}

// idpRedirectURI is where external identity providers send users back.
func (a *App) idpRedirectURI(c *cobra.Command) string {
	_, e, err := a.session(c.Context())
	if err != nil {
		return ""
	}
	return strings.TrimRight(e.Issuer, "/") + "/idps/callback"
}

func prefixed(p string, cols []output.Column) []output.Column {
	out := make([]output.Column, len(cols))
	for i, c := range cols {
		out[i] = output.Column{Header: c.Header, Path: p + c.Path}
	}
	return out
}
