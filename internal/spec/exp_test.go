package spec

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestExp(t *testing.T) {
	for _, f := range []string{"adyen-checkout-v71.json", "paypal-payments-v2.json", "coinbase-cdp.yaml", "twilio-api-v2010.yaml", "svix-server-openapi.json", "stripe-spec3.yaml", "square-connect-v2-oas3-2025-05-21.json", "unit-openapi/openapi.json", "swagger-petstore-v3.yaml"} {
		t0 := time.Now()
		res, err := Load(context.Background(), Options{Path: "/work/shared/specs/" + f, Infer: true})
		if err != nil {
			t.Fatal(err)
		}
		n := -1
		if res.Doc != nil {
			n = len(res.Doc.Operations)
		}
		ds := res.Diags.Sorted()
		fmt.Println(f, time.Since(t0), n, len(ds))
		for i, d := range ds {
			if i < 4 {
				fmt.Println("  ", d)
			}
		}
		if res.Doc != nil && n > 0 {
			fmt.Printf("   %+v\n", res.Doc.Operations[0].Settings.Key)
		}
	}
}
