package login

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Languages are the translated languages; the first is the fallback.
var Languages = []string{"en", "de"}

// Language picks the page language: the first supported ui_locales entry,
// then the best Accept-Language entry (by q), then English.
func Language(uiLocales []string, acceptLanguage string) string {
	for _, l := range uiLocales {
		if b := base(l); slices.Contains(Languages, b) {
			return b
		}
	}
	type pref struct {
		lang string
		q    float64
	}
	var prefs []pref
	for _, part := range strings.Split(acceptLanguage, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		if b := base(tag); q > 0 && slices.Contains(Languages, b) {
			prefs = append(prefs, pref{b, q})
		}
	}
	slices.SortStableFunc(prefs, func(a, b pref) int {
		switch {
		case a.q > b.q:
			return -1
		case a.q < b.q:
			return 1
		}
		return 0
	})
	if len(prefs) > 0 {
		return prefs[0].lang
	}
	return Languages[0]
}

func base(tag string) string {
	b, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(tag)), "-")
	b, _, _ = strings.Cut(b, "_")
	return b
}

// translate returns the message key in lang, formatted with args; a
// missing key falls back to English, then to the key itself.
func translate(lang, key string, args ...any) string {
	msg, ok := messages[lang][key]
	if !ok {
		if msg, ok = messages["en"][key]; !ok {
			msg = key
		}
	}
	if len(args) > 0 {
		return fmt.Sprintf(msg, args...)
	}
	return msg
}

var messages = map[string]map[string]string{
	"en": {
		"mfa.title":                             "Second factor",
		"mfa.useWebAuthn":                       "Use a security key or passkey instead",
		"mfa.webauthn.intro":                    "Select the button, then use your security key or passkey when your browser asks.",
		"mfa.webauthn.button":                   "Use security key",
		"mfa.init.useKey":                       "Set up a security key instead",
		"mfa.init.useOTP":                       "Set up an authenticator app instead",
		"mfa.init.key.intro":                    "Your organization requires a second factor. Select the button, then insert or touch your security key when your browser asks.",
		"mfa.init.key.button":                   "Register security key",
		"passkey.title":                         "Sign in with a passkey",
		"passkey.link":                          "Sign in with a passkey",
		"passkey.intro":                         "Select the button and choose your passkey when your browser asks. No password needed.",
		"passkey.button":                        "Use passkey",
		"passkey.usePassword":                   "Sign in with your user name instead",
		"webauthn.failed":                       "Your browser did not complete the request. Try again, or choose another way below.",
		"webauthn.noscript":                     "This step needs JavaScript: your browser reaches your security key or passkey through it.",
		"err.webauthn":                          "The security key or passkey was not accepted. Try again.",
		"err.webauthnUnavailable":               "Security keys and passkeys need Gatehouse to be reached by a host name (localhost or a domain), not an IP address.",
		"err.passkeyDisabled":                   "This organization does not allow signing in with a passkey.",
		"factor.keyName":                        "Security key",
		"mfa.otp.intro":                         "Enter the 6-digit code your authenticator app shows for this account.",
		"mfa.otp.code":                          "Code",
		"mfa.recovery.intro":                    "Enter one of the recovery codes you saved when you set up your second factor. Each code works once.",
		"mfa.recovery.code":                     "Recovery code",
		"mfa.verify":                            "Verify",
		"mfa.useRecovery":                       "Use a recovery code instead",
		"mfa.useOTP":                            "Use your authenticator app instead",
		"mfa.recovered.title":                   "Recovery code accepted",
		"mfa.recovered.left":                    "You have %s recovery codes left. Set up your second factor again and make new codes on your account page if you lost your authenticator.",
		"continue":                              "Continue",
		"mfa.enrolled":                          "Your second factor is set up. Continue to sign in.",
		"mfa.init.title":                        "Set up a second factor",
		"mfa.init.intro":                        "Your organization requires a second factor. Scan this QR code with an authenticator app (for example FreeOTP, Aegis or Google Authenticator), then enter the code it shows.",
		"mfa.init.qr":                           "QR code for your authenticator app",
		"mfa.init.open":                         "Open in an authenticator app on this device",
		"mfa.init.secret":                       "Or type this key in:",
		"mfa.init.submit":                       "Verify and continue",
		"mfa.codes.title":                       "Save your recovery codes",
		"mfa.codes.intro":                       "If you lose your authenticator, each of these codes signs you in once. Save them somewhere safe now: they are shown only this once.",
		"mfa.codes.saved":                       "I saved them, continue",
		"err.code":                              "The code is wrong or was used already.",
		"login.title":                           "Sign in",
		"login.intro":                           "Sign in to continue to %s.",
		"loginName":                             "Login name",
		"next":                                  "Next",
		"password":                              "Password",
		"signIn":                                "Sign in",
		"otherUser":                             "Sign in with another account",
		"register.link":                         "Create an account",
		"password.title":                        "Enter your password",
		"change.title":                          "Change your password",
		"change.intro":                          "Your password must be changed before you continue.",
		"change.current":                        "Current password",
		"change.new":                            "New password",
		"change.confirm":                        "Confirm the new password",
		"change.submit":                         "Change password",
		"select.title":                          "Choose an account",
		"select.intro":                          "Choose the account to continue to %s with.",
		"register.title":                        "Create an account",
		"register.submit":                       "Create account",
		"userName":                              "User name",
		"firstName":                             "First name",
		"lastName":                              "Last name",
		"email":                                 "Email",
		"policy.intro":                          "The password needs:",
		"policy.min":                            "at least %d characters",
		"policy.upper":                          "an upper-case letter",
		"policy.lower":                          "a lower-case letter",
		"policy.number":                         "a digit",
		"policy.symbol":                         "a symbol",
		"error.title":                           "Something went wrong",
		"error.invalid_request":                 "The application sent a request that cannot be processed.",
		"error.invalid_scope":                   "The application asked for an invalid scope.",
		"error.unauthorized_client":             "The application may not sign in this way.",
		"error.unsupported_response_type":       "The application asked for an unsupported response type.",
		"error.code":                            "Error code",
		"error.back":                            "Please return to the application and try again.",
		"logout.title":                          "Sign out?",
		"logout.text":                           "Do you want to sign out of Gatehouse? These accounts will be signed out on this browser:",
		"logout.submit":                         "Sign out",
		"logout.cancel":                         "If you did not ask to sign out, close this page: nothing changes.",
		"loggedout.title":                       "You are signed out",
		"loggedout.text":                        "You have been signed out. You can close this window.",
		"err.required":                          "Please fill in this field.",
		"err.credentials":                       "The login name or the password is wrong.",
		"err.inactive":                          "This account is deactivated and cannot sign in. Please contact your administrator.",
		"err.mismatch":                          "The passwords do not match.",
		"err.policy":                            "The password does not meet the password policy.",
		"err.passwordLen":                       "The password must have 1 to 72 characters.",
		"err.taken":                             "This user name is not available.",
		"err.invalid":                           "Please check your entries: %s",
		"err.csrf":                              "This form has expired. Please try again.",
		"err.request":                           "This login request is unknown or has expired. Please start again from the application.",
		"err.cookie":                            "Your browser did not send the login cookie. Please enable cookies and start again from the application.",
		"err.unavailable":                       "The service is temporarily unavailable. Please try again in a moment.",
		"err.server":                            "An unexpected error occurred. Please try again.",
		"err.sessionGone":                       "This account is no longer signed in. Please sign in again.",
		"err.wrongOrg":                          "This account cannot sign in to this application.",
		"err.passwordDisabled":                  "Sign-in with a password is not allowed for this organization.",
		"err.registerDisabled":                  "Registration is not allowed for this organization.",
		"err.unknownUser":                       "No user with this login name exists.",
		"idp.signInWith":                        "Sign in with %s",
		"idplink.title":                         "Link your account",
		"idplink.intro":                         "You signed in with %s, but no account of this organization is linked to that identity yet.",
		"idplink.taken":                         "You signed in with %s. An account named %s exists already: if it is yours, sign in to it to link the two.",
		"idplink.existing":                      "I have an account",
		"idplink.link":                          "Sign in and link",
		"idplink.new":                           "Create a new account",
		"idplink.account":                       "The identity at %s:",
		"idplink.name":                          "Name",
		"idplink.subject":                       "Identifier",
		"idplink.issuer":                        "Provider",
		"idplink.confirm":                       "Link this identity to the account I sign in to: whoever signs in with it will sign in as me.",
		"err.confirmLink":                       "Please confirm that this identity is yours.",
		"err.idpLinkRefused":                    "This account cannot be linked to the identity: it is linked to another one at this provider already.",
		"err.idpNotAllowed":                     "Sign-in with an identity provider is not allowed for this organization.",
		"err.idpGone":                           "This identity provider is not available for this organization.",
		"err.idpUnavailable":                    "The identity provider cannot be reached right now. Please try again later or sign in with your password.",
		"err.idpState":                          "This answer from the identity provider is unknown, expired or was already used. Please start again from the application.",
		"err.idpNotLinked":                      "No account of this organization is linked to your identity at this provider. Please contact your administrator.",
		"err.idpNameTaken":                      "An account with your user name exists already. Please sign in with its password, or contact your administrator to link it.",
		"consent.title":                         "Allow access",
		"consent.intro":                         "%s asks for access to your account %s:",
		"consent.accept":                        "Allow",
		"consent.deny":                          "Decline",
		"scope.openid":                          "Sign you in with your account",
		"scope.profile":                         "Your name and profile",
		"scope.email":                           "Your e-mail address",
		"scope.phone":                           "Your phone number",
		"scope.address":                         "Your address",
		"scope.offline_access":                  "Stay signed in while you are away",
		"scope.other":                           "Access: %s",
		"scope.urn:gatehouse:iam:user:metadata": "Your account's metadata",
		"scope.urn:gatehouse:iam:user:resourceowner":           "Your organization's name and domain",
		"scope.urn:gatehouse:iam:org:project:id:gatehouse:aud": "Administer Gatehouse with your roles (only allow this if you started it yourself)",
		"skip":              "Skip to the form",
		"signedInAt":        "signed in",
		"notYou":            "Not you?",
		"showPasswordRules": "Password rules",
	},
	"de": {
		"mfa.title":                             "Zweiter Faktor",
		"mfa.useWebAuthn":                       "Stattdessen einen Sicherheitsschlüssel oder Passkey verwenden",
		"mfa.webauthn.intro":                    "Wählen Sie die Schaltfläche und verwenden Sie dann Ihren Sicherheitsschlüssel oder Passkey, wenn Ihr Browser danach fragt.",
		"mfa.webauthn.button":                   "Sicherheitsschlüssel verwenden",
		"mfa.init.useKey":                       "Stattdessen einen Sicherheitsschlüssel einrichten",
		"mfa.init.useOTP":                       "Stattdessen eine Authenticator-App einrichten",
		"mfa.init.key.intro":                    "Ihre Organisation verlangt einen zweiten Faktor. Wählen Sie die Schaltfläche und stecken oder berühren Sie dann Ihren Sicherheitsschlüssel, wenn Ihr Browser danach fragt.",
		"mfa.init.key.button":                   "Sicherheitsschlüssel registrieren",
		"passkey.title":                         "Mit einem Passkey anmelden",
		"passkey.link":                          "Mit einem Passkey anmelden",
		"passkey.intro":                         "Wählen Sie die Schaltfläche und dann Ihren Passkey, wenn Ihr Browser danach fragt. Kein Passwort nötig.",
		"passkey.button":                        "Passkey verwenden",
		"passkey.usePassword":                   "Stattdessen mit Ihrem Benutzernamen anmelden",
		"webauthn.failed":                       "Ihr Browser hat die Anfrage nicht abgeschlossen. Versuchen Sie es erneut oder wählen Sie unten einen anderen Weg.",
		"webauthn.noscript":                     "Dieser Schritt braucht JavaScript: Ihr Browser erreicht Ihren Sicherheitsschlüssel oder Passkey darüber.",
		"err.webauthn":                          "Der Sicherheitsschlüssel oder Passkey wurde nicht angenommen. Versuchen Sie es erneut.",
		"err.webauthnUnavailable":               "Sicherheitsschlüssel und Passkeys brauchen einen Hostnamen für Gatehouse (localhost oder eine Domain), keine IP-Adresse.",
		"err.passkeyDisabled":                   "Diese Organisation erlaubt die Anmeldung mit einem Passkey nicht.",
		"factor.keyName":                        "Sicherheitsschlüssel",
		"mfa.otp.intro":                         "Geben Sie den 6-stelligen Code ein, den Ihre Authenticator-App für dieses Konto anzeigt.",
		"mfa.otp.code":                          "Code",
		"mfa.recovery.intro":                    "Geben Sie einen der Wiederherstellungscodes ein, die Sie beim Einrichten Ihres zweiten Faktors gespeichert haben. Jeder Code gilt einmal.",
		"mfa.recovery.code":                     "Wiederherstellungscode",
		"mfa.verify":                            "Bestätigen",
		"mfa.useRecovery":                       "Stattdessen einen Wiederherstellungscode verwenden",
		"mfa.useOTP":                            "Stattdessen die Authenticator-App verwenden",
		"mfa.recovered.title":                   "Wiederherstellungscode angenommen",
		"mfa.recovered.left":                    "Sie haben noch %s Wiederherstellungscodes. Falls Sie Ihren Authenticator verloren haben, richten Sie den zweiten Faktor auf Ihrer Kontoseite neu ein und erzeugen Sie neue Codes.",
		"continue":                              "Weiter",
		"mfa.enrolled":                          "Ihr zweiter Faktor ist eingerichtet. Weiter zur Anmeldung.",
		"mfa.init.title":                        "Zweiten Faktor einrichten",
		"mfa.init.intro":                        "Ihre Organisation verlangt einen zweiten Faktor. Scannen Sie diesen QR-Code mit einer Authenticator-App (zum Beispiel FreeOTP, Aegis oder Google Authenticator) und geben Sie dann den angezeigten Code ein.",
		"mfa.init.qr":                           "QR-Code für Ihre Authenticator-App",
		"mfa.init.open":                         "In einer Authenticator-App auf diesem Gerät öffnen",
		"mfa.init.secret":                       "Oder geben Sie diesen Schlüssel ein:",
		"mfa.init.submit":                       "Bestätigen und weiter",
		"mfa.codes.title":                       "Wiederherstellungscodes speichern",
		"mfa.codes.intro":                       "Falls Sie Ihren Authenticator verlieren, meldet Sie jeder dieser Codes einmal an. Speichern Sie sie jetzt an einem sicheren Ort: Sie werden nur dieses eine Mal angezeigt.",
		"mfa.codes.saved":                       "Gespeichert, weiter",
		"err.code":                              "Der Code ist falsch oder wurde schon verwendet.",
		"login.title":                           "Anmelden",
		"login.intro":                           "Melden Sie sich an, um mit %s fortzufahren.",
		"loginName":                             "Loginname",
		"next":                                  "Weiter",
		"password":                              "Passwort",
		"signIn":                                "Anmelden",
		"otherUser":                             "Mit einem anderen Konto anmelden",
		"register.link":                         "Konto erstellen",
		"password.title":                        "Passwort eingeben",
		"change.title":                          "Passwort ändern",
		"change.intro":                          "Sie müssen Ihr Passwort ändern, bevor Sie fortfahren.",
		"change.current":                        "Aktuelles Passwort",
		"change.new":                            "Neues Passwort",
		"change.confirm":                        "Neues Passwort bestätigen",
		"change.submit":                         "Passwort ändern",
		"select.title":                          "Konto auswählen",
		"select.intro":                          "Wählen Sie das Konto, mit dem Sie bei %s fortfahren.",
		"register.title":                        "Konto erstellen",
		"register.submit":                       "Konto erstellen",
		"userName":                              "Benutzername",
		"firstName":                             "Vorname",
		"lastName":                              "Nachname",
		"email":                                 "E-Mail",
		"policy.intro":                          "Das Passwort braucht:",
		"policy.min":                            "mindestens %d Zeichen",
		"policy.upper":                          "einen Großbuchstaben",
		"policy.lower":                          "einen Kleinbuchstaben",
		"policy.number":                         "eine Ziffer",
		"policy.symbol":                         "ein Sonderzeichen",
		"error.title":                           "Etwas ist schiefgelaufen",
		"error.invalid_request":                 "Die Anwendung hat eine Anfrage gesendet, die nicht verarbeitet werden kann.",
		"error.invalid_scope":                   "Die Anwendung hat einen ungültigen Scope angefordert.",
		"error.unauthorized_client":             "Die Anwendung darf diese Anmeldeart nicht verwenden.",
		"error.unsupported_response_type":       "Die Anwendung hat einen nicht unterstützten Antworttyp angefordert.",
		"error.code":                            "Fehlercode",
		"error.back":                            "Bitte kehren Sie zur Anwendung zurück und versuchen Sie es erneut.",
		"logout.title":                          "Abmelden?",
		"logout.text":                           "Möchten Sie sich von Gatehouse abmelden? Diese Konten werden in diesem Browser abgemeldet:",
		"logout.submit":                         "Abmelden",
		"logout.cancel":                         "Wenn Sie sich nicht abmelden wollten, schließen Sie diese Seite: Es ändert sich nichts.",
		"loggedout.title":                       "Sie sind abgemeldet",
		"loggedout.text":                        "Sie wurden abgemeldet. Sie können dieses Fenster schließen.",
		"err.required":                          "Bitte füllen Sie dieses Feld aus.",
		"err.credentials":                       "Der Loginname oder das Passwort ist falsch.",
		"err.inactive":                          "Dieses Konto ist deaktiviert und kann sich nicht anmelden. Bitte wenden Sie sich an Ihren Administrator.",
		"err.mismatch":                          "Die Passwörter stimmen nicht überein.",
		"err.policy":                            "Das Passwort erfüllt die Passwortrichtlinie nicht.",
		"err.passwordLen":                       "Das Passwort muss 1 bis 72 Zeichen haben.",
		"err.taken":                             "Dieser Benutzername ist nicht verfügbar.",
		"err.invalid":                           "Bitte prüfen Sie Ihre Eingaben: %s",
		"err.csrf":                              "Dieses Formular ist abgelaufen. Bitte versuchen Sie es erneut.",
		"err.request":                           "Diese Anmeldeanfrage ist unbekannt oder abgelaufen. Bitte starten Sie erneut aus der Anwendung.",
		"err.cookie":                            "Ihr Browser hat das Anmelde-Cookie nicht gesendet. Bitte erlauben Sie Cookies und starten Sie erneut aus der Anwendung.",
		"err.unavailable":                       "Der Dienst ist vorübergehend nicht verfügbar. Bitte versuchen Sie es gleich noch einmal.",
		"err.server":                            "Ein unerwarteter Fehler ist aufgetreten. Bitte versuchen Sie es erneut.",
		"err.sessionGone":                       "Dieses Konto ist nicht mehr angemeldet. Bitte melden Sie sich erneut an.",
		"err.wrongOrg":                          "Dieses Konto kann sich bei dieser Anwendung nicht anmelden.",
		"err.passwordDisabled":                  "Die Anmeldung mit Passwort ist für diese Organisation nicht erlaubt.",
		"err.registerDisabled":                  "Die Registrierung ist für diese Organisation nicht erlaubt.",
		"err.unknownUser":                       "Es gibt keinen Benutzer mit diesem Loginnamen.",
		"idp.signInWith":                        "Anmelden mit %s",
		"idplink.title":                         "Konto verknüpfen",
		"idplink.intro":                         "Sie haben sich mit %s angemeldet, aber mit dieser Identität ist noch kein Konto dieser Organisation verknüpft.",
		"idplink.taken":                         "Sie haben sich mit %s angemeldet. Ein Konto namens %s existiert bereits: Wenn es Ihres ist, melden Sie sich daran an, um beide zu verknüpfen.",
		"idplink.existing":                      "Ich habe ein Konto",
		"idplink.link":                          "Anmelden und verknüpfen",
		"idplink.new":                           "Neues Konto erstellen",
		"idplink.account":                       "Die Identität bei %s:",
		"idplink.name":                          "Name",
		"idplink.subject":                       "Kennung",
		"idplink.issuer":                        "Anbieter",
		"idplink.confirm":                       "Diese Identität mit dem Konto verknüpfen, an dem ich mich anmelde: Wer sich mit ihr anmeldet, ist dann als ich angemeldet.",
		"err.confirmLink":                       "Bitte bestätigen Sie, dass diese Identität Ihre ist.",
		"err.idpLinkRefused":                    "Dieses Konto kann nicht mit der Identität verknüpft werden: Es ist bei diesem Anbieter schon mit einer anderen verknüpft.",
		"err.idpNotAllowed":                     "Die Anmeldung über einen Identitätsanbieter ist für diese Organisation nicht erlaubt.",
		"err.idpGone":                           "Dieser Identitätsanbieter ist für diese Organisation nicht verfügbar.",
		"err.idpUnavailable":                    "Der Identitätsanbieter ist gerade nicht erreichbar. Bitte versuchen Sie es später erneut oder melden Sie sich mit Ihrem Passwort an.",
		"err.idpState":                          "Diese Antwort des Identitätsanbieters ist unbekannt, abgelaufen oder wurde schon verwendet. Bitte starten Sie erneut aus der Anwendung.",
		"err.idpNotLinked":                      "Mit Ihrer Identität bei diesem Anbieter ist kein Konto dieser Organisation verknüpft. Bitte wenden Sie sich an Ihren Administrator.",
		"err.idpNameTaken":                      "Ein Konto mit Ihrem Benutzernamen existiert bereits. Bitte melden Sie sich mit seinem Passwort an oder bitten Sie Ihren Administrator, es zu verknüpfen.",
		"consent.title":                         "Zugriff erlauben",
		"consent.intro":                         "%s bittet um Zugriff auf Ihr Konto %s:",
		"consent.accept":                        "Erlauben",
		"consent.deny":                          "Ablehnen",
		"scope.openid":                          "Sie mit Ihrem Konto anmelden",
		"scope.profile":                         "Ihr Name und Profil",
		"scope.email":                           "Ihre E-Mail-Adresse",
		"scope.phone":                           "Ihre Telefonnummer",
		"scope.address":                         "Ihre Adresse",
		"scope.offline_access":                  "Angemeldet bleiben, während Sie weg sind",
		"scope.other":                           "Zugriff: %s",
		"scope.urn:gatehouse:iam:user:metadata": "Die Metadaten Ihres Kontos",
		"scope.urn:gatehouse:iam:user:resourceowner":           "Name und Domain Ihrer Organisation",
		"scope.urn:gatehouse:iam:org:project:id:gatehouse:aud": "Gatehouse mit Ihren Rollen verwalten (nur erlauben, wenn Sie dies selbst gestartet haben)",
		"skip":              "Zum Formular springen",
		"signedInAt":        "angemeldet",
		"notYou":            "Nicht Sie?",
		"showPasswordRules": "Passwortregeln",
	},
}
