# The twenty streams of the fleet, by job. Keep the values literal (or var.*):
# tests/cli/terraform.rs reads this file, evaluates the sluice_fleet module's streams.tf
# with it, and renders and validates every stream's SLUICE_CONFIG.

locals {
  tables = {
    "shop-orders" = {
      tables                 = ["public.orders"]
      postgres               = { slot = "sluice_orders", publication = "sluice_orders" }
      initial                = "snapshot"
      baseline               = { chunk_rows = 250000, parallel = 4 }
      baseline_state_machine = true
    }
    "shop-order-lines" = {
      tables   = ["public.order_lines"]
      postgres = { slot = "sluice_order_lines", publication = "sluice_order_lines" }
    }
    "shop-payments" = {
      tables   = ["public.payments"]
      postgres = { slot = "sluice_payments", publication = "sluice_payments" }
    }
    "shop-refunds" = {
      tables   = ["public.refunds"]
      postgres = { slot = "sluice_refunds", publication = "sluice_refunds" }
    }
    "shop-invoices" = {
      tables   = ["public.invoices"]
      postgres = { slot = "sluice_invoices", publication = "sluice_invoices" }
    }
    "shop-shipments" = {
      tables   = ["public.shipments"]
      postgres = { slot = "sluice_shipments", publication = "sluice_shipments" }
    }
    "shop-returns" = {
      tables   = ["public.returns"]
      postgres = { slot = "sluice_returns", publication = "sluice_returns" }
    }
    "shop-carts" = {
      tables   = ["public.carts"]
      postgres = { slot = "sluice_carts", publication = "sluice_carts" }
    }
    "shop-cart-items" = {
      tables   = ["public.cart_items"]
      postgres = { slot = "sluice_cart_items", publication = "sluice_cart_items" }
    }
    "shop-products" = {
      tables   = ["public.products"]
      postgres = { slot = "sluice_products", publication = "sluice_products" }
    }
    "shop-prices" = {
      tables   = ["public.prices"]
      postgres = { slot = "sluice_prices", publication = "sluice_prices" }
    }
    "shop-stock" = {
      tables   = ["public.stock"]
      postgres = { slot = "sluice_stock", publication = "sluice_stock" }
    }
    "shop-warehouses" = {
      tables   = ["public.warehouses"]
      postgres = { slot = "sluice_warehouses", publication = "sluice_warehouses" }
    }
    "shop-suppliers" = {
      tables   = ["public.suppliers"]
      postgres = { slot = "sluice_suppliers", publication = "sluice_suppliers" }
    }
    "crm-customers" = {
      engine      = "mysql"
      secret_arn  = var.mysql_secret_arn
      tables      = ["crm.customers"]
      mysql       = { server_id = 4242101 }
      memory_size = 512
      timeout     = 600
    }
    "crm-addresses" = {
      engine      = "mysql"
      secret_arn  = var.mysql_secret_arn
      tables      = ["crm.addresses"]
      mysql       = { server_id = 4242102 }
      memory_size = 512
      timeout     = 600
    }
    "crm-loyalty" = {
      engine      = "mysql"
      secret_arn  = var.mysql_secret_arn
      tables      = ["crm.loyalty"]
      mysql       = { server_id = 4242103 }
      memory_size = 512
      timeout     = 600
    }
    "crm-reviews" = {
      engine      = "mysql"
      secret_arn  = var.mysql_secret_arn
      tables      = ["crm.reviews"]
      mysql       = { server_id = 4242104 }
      memory_size = 512
      timeout     = 600
    }
    "crm-wishlists" = {
      engine      = "mysql"
      secret_arn  = var.mysql_secret_arn
      tables      = ["crm.wishlists"]
      mysql       = { server_id = 4242105 }
      memory_size = 512
      timeout     = 600
    }
    "crm-newsletter" = {
      engine      = "mysql"
      secret_arn  = var.mysql_secret_arn
      tables      = ["crm.newsletter"]
      mysql       = { server_id = 4242106 }
      memory_size = 512
      timeout     = 600
    }
  }
}
