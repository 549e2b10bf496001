package serving

// validateRESP checks the keys of the RESP door: its address, its TLS
// files in pairs, the user with its password file, and no negative
// bound.
func (f *File) validateRESP(p *problems) {
	if f.RESPListen != "" {
		if _, _, err := splitHostPort(f.RESPListen); err != nil {
			p.bad("respListen", "%v", err)
		}
	}
	switch {
	case (f.RESPTLSCert == "") != (f.RESPTLSKey == ""):
		p.bad("respTlsCert", "and respTlsKey go together: set both or neither")
	case f.RESPTLSClientCA != "" && f.RESPTLSCert == "":
		p.bad("respTlsClientCa", "needs respTlsCert and respTlsKey: client certificates are asked for only over TLS")
	}
	if f.RESPUser != "" && f.RESPPasswordFile == "" {
		p.bad("respUser", "needs respPasswordFile, the file holding the user's password")
	}
	for key, v := range map[string]int{"respResultTTL": f.RESPResultTTL, "respIdleTimeout": f.RESPIdleTimeout, "respMaxConnections": f.RESPMaxConnections} {
		if v < 0 {
			p.bad(key, "%d is negative", v)
		}
	}
}
