package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/idemgen/idemgen/examples/petstore/api"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// addPet is the business function of the idempotent addPet operation. It writes through tx
// only; the runtime commits tx together with the stored 201, so a retry with the same key gets
// this very answer back instead of a second pet.
func (s *store) addPet(ctx context.Context, tx pgstore.DBTX, _ api.AddPetParams, pet api.AddPetBody) (runtime.Response, error) {
	var status *string
	if pet.Status != nil {
		v := string(*pet.Status)
		status = &v
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO pets (name, status, doc) VALUES ($1, $2, '{}') RETURNING id`,
		pet.Name, status).Scan(&id); err != nil {
		return runtime.Response{}, fmt.Errorf("insert pet: %w", err)
	}
	pet.ID = &id // the store assigns ids; a client-sent id is not kept
	doc, err := json.Marshal(pet)
	if err != nil {
		return runtime.Response{}, fmt.Errorf("encode pet: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE pets SET doc = $2 WHERE id = $1`, id, doc); err != nil {
		return runtime.Response{}, fmt.Errorf("store pet: %w", err)
	}
	resp := runtime.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: doc}
	resp.Header.Set("Location", "/pet/"+strconv.FormatInt(id, 10))
	return resp, nil
}

// placeOrder is the business function of the idempotent placeOrder operation: it checks the
// pet, waits out the demo delay (a slow payment step in a real store), and writes the order
// through tx.
func (s *store) placeOrder(ctx context.Context, tx pgstore.DBTX, _ api.PlaceOrderParams, o api.PlaceOrderBody) (runtime.Response, error) {
	if o.PetID == nil || o.Quantity == nil || *o.Quantity < 1 {
		// A final business refusal: stored and replayed like any 4xx.
		return problem(http.StatusBadRequest, "order-invalid", "an order needs petId and a quantity of at least 1"), nil
	}
	var shipDate *time.Time
	if o.ShipDate != nil {
		d, err := time.Parse(time.RFC3339, *o.ShipDate)
		if err != nil {
			return problem(http.StatusBadRequest, "order-invalid", "shipDate is not an RFC 3339 date-time"), nil
		}
		shipDate = &d
	}
	status := string(api.OrderStatusPlaced)
	if o.Status != nil {
		status = string(*o.Status)
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pets WHERE id = $1)`, *o.PetID).Scan(&exists); err != nil {
		return runtime.Response{}, fmt.Errorf("find pet: %w", err)
	}
	if !exists {
		return problem(http.StatusNotFound, "pet-not-found", fmt.Sprintf("no pet %d", *o.PetID)), nil
	}
	if err := sleep(ctx, s.opts.orderDelay); err != nil {
		return runtime.Response{}, err
	}
	var id int64
	if err := tx.QueryRow(ctx,
		`INSERT INTO orders (pet_id, quantity, ship_date, status, complete) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		*o.PetID, *o.Quantity, shipDate, status, o.Complete != nil && *o.Complete).Scan(&id); err != nil {
		return runtime.Response{}, fmt.Errorf("insert order: %w", err)
	}
	saved, err := readOrder(ctx, tx, id)
	if err != nil {
		return runtime.Response{}, fmt.Errorf("read order: %w", err)
	}
	resp, err := runtime.JSON(http.StatusCreated, saved)
	if err != nil {
		return runtime.Response{}, err
	}
	resp.Header.Set("Location", "/store/order/"+strconv.FormatInt(id, 10))
	return resp, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errors.Join(errors.New("placeOrder interrupted"), ctx.Err())
	}
}
