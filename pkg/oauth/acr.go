package oauth

import "slices"

// Authentication method references (RFC 8176) Gatehouse records.
const (
	AMRPassword = "pwd"  // a password
	AMROTP      = "otp"  // a one-time code: TOTP, or a recovery code
	AMRHardware = "hwk"  // a security key (WebAuthn, proof of a hardware key)
	AMRSoftware = "swk"  // a software-held key (a passkey, a machine key)
	AMRUser     = "user" // user presence and verification at the authenticator
	AMRMFA      = "mfa"  // two distinct factors
)

// Authentication context class references: what a login proved, weakest
// first (ACRValues).
const (
	ACRPassword = "urn:gatehouse:acr:password"
	// ACRMFA: two distinct factors.
	ACRMFA = "urn:gatehouse:acr:mfa"
	// ACRPhishingResistant: a WebAuthn factor, bound to the origin.
	ACRPhishingResistant = "urn:gatehouse:acr:phr"
)

// acrOrder ranks the classes, weakest first.
var acrOrder = []string{ACRPassword, ACRMFA, ACRPhishingResistant}

// ACRValues are the acr values Gatehouse issues and honours in acr_values
// (acr_values_supported), weakest first.
func ACRValues() []string { return slices.Clone(acrOrder) }

// AMRValues are the amr values Gatehouse may issue (amr_values_supported):
// RFC 8176's, and "fed" for a sign-in through an external provider.
func AMRValues() []string {
	return []string{AMRPassword, AMROTP, AMRHardware, AMRSoftware, AMRUser, AMRMFA, "fed"}
}

// ACR is the class a person's login by amr reached: phishing-resistant
// with a WebAuthn factor (hwk, or a passkey's swk with user
// verification), mfa with two factors, password (one factor) with a
// password, a code or an external provider. amr without a person's login
// (a machine key's swk alone, or none) has no class: "".
func ACR(amr []string) string {
	has := func(v string) bool { return slices.Contains(amr, v) }
	switch {
	case has(AMRHardware), has(AMRSoftware) && has(AMRUser):
		return ACRPhishingResistant
	case has(AMRMFA):
		return ACRMFA
	case has(AMRPassword), has(AMROTP), has("fed"):
		return ACRPassword
	}
	return ""
}

// ACRSatisfies reports whether a login of class have meets a request for
// class want (a stronger class meets a weaker one); an unknown want is
// met by nothing.
func ACRSatisfies(have, want string) bool {
	h, w := slices.Index(acrOrder, have), slices.Index(acrOrder, want)
	return w >= 0 && h >= w
}
